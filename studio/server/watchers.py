"""Admitting a watcher: a read-only peer on a running session (the watch page or a WHEP player).

Its peer sends the session's shared encoded stream (`webrtc.fanout`) and, if it opened a data channel, the
session's per-frame status; it has no rendering, encoding or control of its own."""

from __future__ import annotations

import asyncio
import logging
import secrets

from studio.server.audience import Watcher
from studio.server.ice import peer_connection, require_relay
from studio.server.settings import Settings
from webrtc.answer import UnusableOffer, answer_sendonly, require_video

log = logging.getLogger("alaya.watchers")


async def admit(session, sdp: str, settings: Settings) -> tuple[Watcher, str]:
    """A new watcher of `session` from its SDP offer: (watcher, SDP answer). Raises AudienceFull, UnusableOffer,
    IceFailed."""
    audience = session.audience
    audience.reserve()
    try:
        require_video(sdp)
        watcher_id = secrets.token_urlsafe(16)
        pc = peer_connection(settings.ice, f"{session.id}-w")
        track = audience.fanout.track()
        watcher = Watcher(watcher_id, pc, track)

        @pc.on("datachannel")
        def _on_datachannel(channel) -> None:
            watcher.channel = channel
            channel.on("message", lambda message: audience.on_message(watcher, message))
            hello = session.hello(watcher=True)
            channel.on("open", lambda: watcher.send(hello))
            if channel.readyState == "open":
                watcher.send(hello)

        @pc.on("connectionstatechange")
        def _on_state() -> None:
            if pc.connectionState in ("failed", "closed"):
                audience.tasks.spawn(audience.remove(watcher_id), name=f"watcher-gone-{watcher_id[:4]}")

        try:
            answer = await answer_sendonly(pc, track, sdp)
        except UnusableOffer:
            track.stop()
            raise
        await require_relay(pc, settings.ice)

        def _install() -> None:  # first recv(): before aiortc creates an encoder of its own
            audience.fanout.encoders.install(answer.sender, answer.mime_type)
        track.on_first_recv = _install
        audience.add(watcher)
        audience.tasks.spawn(_drop_if_never_connected(audience, watcher, settings.connect_timeout_s),
                             name=f"watcher-connect-{watcher.id[:4]}")
        return watcher, answer.sdp
    finally:
        audience.pending -= 1


async def _drop_if_never_connected(audience, watcher: Watcher, timeout_s: float) -> None:
    await asyncio.sleep(timeout_s)
    if watcher.pc.connectionState != "connected" and await audience.remove(watcher.id):
        log.info("watcher %s… of session %s never connected", watcher.id[:4], audience.session.id)
