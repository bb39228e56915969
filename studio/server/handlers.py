"""A session's data-channel handlers: one small handler per client message type, in one table.

Handlers run on the event loop. They check what they can at once (a bad message answers one error line and
changes nothing) and queue as a command whatever touches the rollout; the worker applies it between chunks and
sends its answer (an `ack`, or an error).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

from pydantic import BaseModel

from alaya_errors import UserError
from gbuffer.input import PlayerInput
from gbuffer.source import LiveSource
from prompt_presets import Conditioning, PromptSpec, get_preset, resolve_prompt
from prompt_presets.matching import matching_ready, when_matching_ready
from timeline.schedule import Schedule, schedule_from_value
from webrtc import protocol as dc
from webrtc.stamp import stamp_fits

if TYPE_CHECKING:
    from studio.server.session import LiveSession

Handler = Callable[["ChannelHandlers", BaseModel], None]
HANDLERS: dict[str, Handler] = {}       # client message type → its handler


def handles(*kinds: str):
    def register(handler: Handler) -> Handler:
        for kind in kinds:
            if kind in HANDLERS:
                raise TypeError(f"two handlers for {kind!r} messages")
            HANDLERS[kind] = handler
        return handler
    return register


class ChannelHandlers:
    def __init__(self, session: "LiveSession"):
        self.session = session
        self.worker = session.worker
        self.outbox = session.outbox
        self.keys = dc.KeyState()

    def handle(self, text: str | bytes) -> None:
        """One data-channel message; a bad one answers an error and changes nothing."""
        try:
            msg = dc.parse_client_message(text)
        except UserError as exc:
            self.outbox.refuse(exc)
            return
        try:
            self.apply(msg)
        except UserError as exc:
            self.outbox.refuse(exc, msg.type)

    def apply(self, msg: BaseModel) -> None:
        """A client message model: parsed from the page's text, or built (`dc.build`) by a command from outside
        the page (OSC), which hears a bad one as its UserError instead of an answer on the channel."""
        HANDLERS[msg.type](self, msg)

    def require_recorded(self, what: str) -> None:
        if not self.session.rollout.recorded:
            raise dc.ProtocolError(f"'{what}' needs a recorded source; {self.session.source_name} is live", what)

    def require_live(self, what: str) -> LiveSource:
        source = self.session.rollout.source
        if not isinstance(source, LiveSource):
            raise dc.ProtocolError(f"'{what}' needs a live source; {self.session.source_name} is recorded", what)
        return source


# ---- prompts and the timeline --------------------------------------------------------------------------------

@handles("prompt", "preset", "blend")
def switch_now(h: ChannelHandlers, msg) -> None:
    conditioning = conditioning_from_message(msg)
    timeline, rollout = h.session.timeline, h.session.rollout

    def command() -> dc.Ack:
        frame = rollout.frame_index
        whole_loop = timeline.switch(frame, conditioning, msg.transition)
        return dc.Ack(request=msg.type, frame=frame, transition=msg.transition, label=conditioning.label(),
                      whole_loop=whole_loop)
    if any(p.preset is None for p in conditioning.prompts) and not matching_ready():
        # free text goes through the preset matcher, whose model is still loading: frames go on in the
        # current style meanwhile
        h.outbox.send(dc.Preparing(request=msg.type, label=conditioning.label()))
        when_matching_ready(lambda: h.worker.submit(command))
    else:
        h.worker.submit(command)


@handles("switch")
def switch_at(h: ChannelHandlers, msg) -> None:
    conditioning = conditioning_from_specs(msg.prompts, msg.mode)

    def command() -> dc.Ack:
        h.session.timeline.patch(msg.frame, conditioning, msg.transition)
        return dc.Ack(request="switch", frame=msg.frame, transition=msg.transition, label=conditioning.label())
    h.worker.submit(command)


@handles("schedule")
def replace_schedule(h: ChannelHandlers, msg) -> None:
    # parsed by the worker, not here: a 2 KB Parseq export of a million frames takes tens of seconds to
    # evaluate, which on the event loop would freeze every session's video and signalling
    def command() -> dc.Ack | None:
        try:
            schedule = schedule_from_message(msg)
        except UserError as exc:     # answered as the schedule's error, so the page knows which edit failed
            h.outbox.refuse(exc, "schedule")
            return None
        frame = h.session.rollout.frame_index
        h.session.timeline.replace(schedule, now=frame if msg.from_now else None)
        return dc.Ack(request="schedule", frame=frame)
    h.worker.submit(command)


# ---- playback ----------------------------------------------------------------------------------------------

@handles("play", "pause")
def play_pause(h: ChannelHandlers, msg) -> None:
    paused = msg.type == "pause"
    h.worker.submit(lambda: h.worker.set_paused(paused))


@handles("seek")
def seek(h: ChannelHandlers, msg) -> None:
    h.require_recorded("seek")
    h.worker.submit(lambda: h.worker.seek(msg.frame))


@handles("loop")
def loop(h: ChannelHandlers, msg) -> None:
    h.worker.set_loop(msg.on)
    h.outbox.send(dc.Ack(request="loop", on=msg.on))


@handles("stamp")
def stamp(h: ChannelHandlers, msg) -> None:
    width, height = h.session.width, h.session.height
    if msg.on and not stamp_fits(width, height):
        raise dc.ProtocolError(f"{width}x{height} is too small for the frame stamp", "stamp")
    # read per frame as the worker hands frames over: from the next one, which may be one rendered already
    h.worker.stamp = msg.on
    h.outbox.send(dc.Ack(request="stamp", on=msg.on))


@handles("take")
def take(h: ChannelHandlers, msg) -> None:
    if msg.action == "start":
        h.session.takes.start()
    else:
        h.session.takes.stop()


# ---- driving a live source ---------------------------------------------------------------------------------

@handles("key")
def key(h: ChannelHandlers, msg) -> None:
    source = h.require_live("key")
    player_input = h.keys.press(msg.key, msg.down)
    h.worker.submit(lambda: drive(source, player_input))


@handles("input")
def analogue_input(h: ChannelHandlers, msg) -> None:
    source = h.require_live("input")
    player_input = PlayerInput(msg.steer, msg.throttle, msg.brake, msg.reset)
    h.worker.submit(lambda: drive(source, player_input))


@handles("autopilot")
def autopilot(h: ChannelHandlers, msg) -> None:
    source = h.require_live("autopilot")

    def command() -> dc.Ack:
        if not hasattr(source, "autopilot"):
            raise dc.ProtocolError(f"{h.session.source_name} has no autopilot", "autopilot")
        source.autopilot = msg.on
        return dc.Ack(request="autopilot", on=msg.on)
    h.worker.submit(command)


def drive(source: LiveSource, player_input: PlayerInput) -> None:
    if hasattr(source, "autopilot"):
        source.autopilot = False  # a driver took the wheel
    source.apply_input(player_input)


# ---- questions ---------------------------------------------------------------------------------------------

@handles("stats")
def stats(h: ChannelHandlers, msg) -> None:
    h.outbox.send(h.session.stats())


@handles("ping")
def ping(h: ChannelHandlers, msg) -> None:
    h.outbox.send(dc.Pong.answer(msg.t))


# ---- messages → conditioning and schedules -----------------------------------------------------------------

def conditioning_from_specs(prompts: list[PromptSpec], mode: str = "linear") -> Conditioning:
    return Conditioning(tuple(p.resolve() for p in prompts), mode)  # type: ignore[arg-type]


def conditioning_from_message(msg) -> Conditioning:
    """A prompt / preset / blend message → Conditioning (unknown presets raise PresetError)."""
    if msg.type == "prompt":
        return Conditioning((resolve_prompt(msg.text),))
    if msg.type == "preset":
        return Conditioning((resolve_prompt(get_preset(msg.name).name),))
    return conditioning_from_specs(msg.prompts, msg.mode)


def schedule_from_message(msg: dc.SetSchedule) -> Schedule:
    if (msg.schedule is None) == (msg.text is None):
        raise dc.ProtocolError("give exactly one of 'schedule' (JSON) or 'text'", "schedule message")
    return schedule_from_value(msg.schedule if msg.schedule is not None else msg.text, "schedule")
