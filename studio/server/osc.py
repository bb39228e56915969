"""OSC show control: UDP packets from a control surface (TouchOSC, QLab, a lighting desk) become the data
channel's commands on a live session. See docs/presenting.md for the address map.

    /alaya/preset <name>            /alaya/prompt <text>          /alaya/blend <a> <b> <weight of b>
    /alaya/transition <frames>      /alaya/pause   /alaya/play    /alaya/seek <frame>
    /alaya/take/start               /alaya/take/stop
    /alaya/tempo <bpm>              /alaya/beat   /alaya/downbeat   /alaya/quantize <off|beat|bar>
    /alaya/session/<id>/<command>   the same, naming the presenter's session by id

OSC carries no credentials, and any local program can send it, so it steers one session only (issue 42): the one
named with `serve --osc-session`, else the newest session started with the admin token (the presenter's). Any
other session, addressed by id or not, is refused ("not the presenter's session"). Packets are parsed with
python-osc. A bundle's timetag in the future places its switches (preset, prompt, blend) on the frame the studio
sends at that time, on the timeline ahead of time; nothing waits for it, and its other commands apply at once.
`/alaya/quantize` makes the next switches land on the next beat or bar of `/alaya/tempo`. A bad packet or command
is counted in /metrics by reason and logged once per reason; it never reaches a session as an exception.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any, Callable

from pydantic import BaseModel
from pythonosc.osc_packet import OscPacket, ParseError

from alaya_errors import UserError
from studio.server.metrics import StudioMetrics
from webrtc import protocol as dc

log = logging.getLogger("alaya.osc")
PREFIX = "/alaya/"


class OscRejected(UserError):
    """An OSC message that cannot be applied; `reason` is its metrics label."""

    def __init__(self, reason: str, message: str):
        super().__init__(message, "osc")
        self.reason = reason


def _args(args: list, *kinds: type, address: str) -> list:
    """`args` if they match `kinds` (int passes for float); else OscRejected('bad arguments')."""
    ok = len(args) == len(kinds) and all(
        isinstance(a, k) or (k is float and isinstance(a, int)) for a, k in zip(args, kinds))
    if not ok or any(isinstance(a, bool) for a in args):
        wanted = " ".join(k.__name__ for k in kinds) or "no arguments"
        raise OscRejected("bad arguments", f"{address} takes {wanted}, got {args!r}"[:200])
    return args


class OscControl(asyncio.DatagramProtocol):
    def __init__(self, sessions, metrics: StudioMetrics, settings):
        self.sessions = sessions            # SessionManager
        self.metrics = metrics
        self.settings = settings            # its osc_session may change while the studio runs (PUT /api/osc)
        self.transitions: dict[str, int] = {}   # session id → frames, set by /alaya/transition
        self.quantize: dict[str, str] = {}      # session id → beat / bar, set by /alaya/quantize
        self._logged: set[str] = set()
        # command → (argument types, the data-channel message built from the session id and the arguments)
        self.commands: dict[str, tuple[tuple[type, ...], Callable[[str, list], BaseModel | None]]] = {
            "preset": ((str,), lambda sid, a: dc.build(dc.SetPreset, name=a[0], **self._transition_of(sid))),
            "prompt": ((str,), lambda sid, a: dc.build(dc.SetPrompt, text=a[0], **self._transition_of(sid))),
            "blend": ((str, str, float), self._blend),
            "transition": ((int,), self._set_transition),
            "pause": ((), lambda sid, a: dc.build(dc.Pause)),
            "play": ((), lambda sid, a: dc.build(dc.Play)),
            "seek": ((int,), lambda sid, a: dc.build(dc.Seek, frame=a[0])),
            "take/start": ((), lambda sid, a: dc.build(dc.Take, action="start")),
            "take/stop": ((), lambda sid, a: dc.build(dc.Take, action="stop")),
            "tempo": ((float,), lambda sid, a: dc.build(dc.SetTempo, bpm=a[0])),
            "beat": ((), lambda sid, a: dc.build(dc.Beat)),
            "downbeat": ((), lambda sid, a: dc.build(dc.Beat, downbeat=True)),
            "quantize": ((str,), self._set_quantize),
        }

    # ---- UDP ---------------------------------------------------------------------------------------------

    def datagram_received(self, data: bytes, addr) -> None:
        try:
            timed_messages = OscPacket(data).messages
            messages = [timed.message for timed in timed_messages]
        except (ParseError, ValueError, IndexError, TypeError):   # python-osc's parser raises more than ParseError
            self._reject(OscRejected("not OSC", f"a {len(data)}-byte packet that is not OSC"))
            return
        # python-osc gives a message of a bundle timed in the past, or immediately, the time of arrival
        arrived = time.time()
        for timed, message in zip(timed_messages, messages):
            self.apply(message.address, list(message.params), at=timed.time if timed.time > arrived else None)

    def apply(self, address: str, args: list, at: float | None = None) -> None:
        """One message (`at`: its bundle's timetag, when in the future); counted as applied or rejected (with
        its reason), never raised."""
        try:
            session, command = self._route(address)
            if command not in self.commands:
                raise OscRejected("unknown address", f"unknown address {address[:80]!r}")
            kinds, build = self.commands[command]
            message = build(session.id, _args(args, *kinds, address=address))
            if message is not None and at is not None and isinstance(message, dc.SWITCHES):
                message = message.model_copy(update={"at": at})
            if message is not None:
                session.control.submit(message)
        except OscRejected as exc:
            self._reject(exc)
        except UserError as exc:   # the session refused it: unknown preset, seek on a live source, ...
            self._reject(OscRejected("refused", f"{address}: {exc}"))
        else:
            self.metrics.osc_applied.inc()

    # ---- commands ------------------------------------------------------------------------------------------

    def _transition_of(self, sid: str) -> dict:
        """How the presenter's switches land: their transition and quantize settings."""
        return {"transition": self.transitions.get(sid, 0), "quantize": self.quantize.get(sid)}

    def _set_quantize(self, sid: str, args: list) -> None:
        if args[0] not in ("off", "beat", "bar"):
            raise OscRejected("bad arguments", f"quantize {args[0][:20]!r} is not off, beat or bar")
        if args[0] == "off":
            self.quantize.pop(sid, None)
        else:
            self.quantize[sid] = args[0]
        return None

    def _blend(self, sid: str, args: list) -> BaseModel:
        a, b, weight = args
        if not 0.0 <= weight <= 1.0:
            raise OscRejected("bad arguments", f"blend weight {weight:g} is not within 0..1")
        return dc.build(dc.SetBlend, prompts=[{"text": a, "weight": 1.0 - weight}, {"text": b, "weight": weight}],
                        **self._transition_of(sid))

    def _set_transition(self, sid: str, args: list) -> None:
        if not 0 <= args[0] <= dc.MAX_SWITCH_FRAMES:
            raise OscRejected("bad arguments", f"transition {args[0]} frames is not within 0..{dc.MAX_SWITCH_FRAMES}")
        self.transitions[sid] = args[0]
        return None

    # ---- helpers -------------------------------------------------------------------------------------------

    def _route(self, address: str) -> tuple[Any, str]:
        """'/alaya/preset' → (presenter's session, 'preset'); '/alaya/session/ID/preset' → (session ID, ...)."""
        if not address.startswith(PREFIX):
            raise OscRejected("unknown address", f"unknown address {address[:80]!r}")
        parts = address[len(PREFIX):].split("/")
        presenter = self._presenter()
        if parts[0] == "session" and len(parts) >= 3:
            if parts[1] != presenter.id:
                raise OscRejected("not the presenter's session", f"session {parts[1][:40]!r} is not the one OSC "
                                  "steers (--osc-session, else the admin's newest)")
            return presenter, "/".join(parts[2:])
        return presenter, "/".join(parts)

    def _presenter(self):
        live = self.sessions.sessions
        named = self.settings.osc_session
        if named:
            session = live.get(named)
        else:
            session = next((s for s in reversed(live.values()) if s.presenter), None)
        if session is None:
            raise OscRejected("no session", f"no live session {named!r}" if named
                              else "no live session started with the admin token to control")
        return session

    def _reject(self, exc: OscRejected) -> None:
        self.metrics.osc_rejected.labels(exc.reason).inc()
        if exc.reason not in self._logged:   # once per reason: a flood of junk must not flood the log
            self._logged.add(exc.reason)
            log.warning("OSC message rejected (%s): %s; further ones of this kind are only counted",
                        exc.reason, exc.detail)


def refuse_remote(settings) -> None:
    """OSC carries no credentials: whoever can send a UDP packet to it steers every session. So beyond loopback
    it starts only when the operator says so (`--osc-allow-remote`; docs/presenting.md)."""
    from studio.server.settings import is_loopback

    if not is_loopback(settings.osc_host) and not settings.osc_allow_remote:
        raise UserError(f"OSC on {settings.osc_host} would let anyone on that network steer every session (OSC "
                        "carries no credentials); add --osc-allow-remote to confirm, or keep it on 127.0.0.1",
                        "--osc-host")


async def start_osc(settings, sessions, metrics) -> asyncio.DatagramTransport:
    refuse_remote(settings)
    loop = asyncio.get_running_loop()
    transport, _ = await loop.create_datagram_endpoint(
        lambda: OscControl(sessions, metrics, settings),
        local_addr=(settings.osc_host, settings.osc_port))
    log.info("OSC control on udp://%s:%d", settings.osc_host, settings.osc_port)
    return transport
