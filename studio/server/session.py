"""One live session: a peer connection's rollout and the parts that run it.

- the control (studio/server/control.py): the one way in, for every front door: typed commands in, answers out;
- the worker (studio/server/worker.py): renders in a thread of its own and hands frames to the video track;
- the live timeline (timeline/schedule/live.py): the schedule it plays, and the switches made while it plays;
- the take control (studio/server/take_control.py), the reports (per-frame status, stats) and the audience.
The session is given what it needs in its constructor and owns these parts; nothing sets its attributes.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Callable

from gbuffer.source import LiveSource, Source
from renderer.base import RenderSession, RendererError
from timeline.rollout import RenderedFrame, Rollout
from timeline.schedule import Schedule
from timeline.schedule.live import LiveTimeline
from studio.server.audience import Audience
from studio.server.commands import SessionParts
from studio.server.control import SessionControl
from studio.server.engine_channel import EngineChannel
from studio.server.metrics import SessionObserver
from studio.server.outbox import Outbox, to_data_channel
from studio.server.planner import SessionPlan
from studio.server.reports import SessionReports
from studio.server.take_control import TakeControl
from studio.server.worker import FrameSink, SessionWorker
from studio.takes import TakeStarter
from webrtc import protocol as dc
from webrtc.answer import SendOnlyAnswer, close_peer
from webrtc.encoders import EncoderSettings
from webrtc.track import FrameBuffer, OutgoingFrame, SessionVideoTrack

log = logging.getLogger("alaya.session")


class LiveSession:
    def __init__(self, session_id: str, plan: SessionPlan, source: Source, render_session: RenderSession, peer,
                 *, loop: asyncio.AbstractEventLoop, stamp: bool = False, loop_playback: bool = True,
                 observer: SessionObserver | None = None, offered_at: float | None = None,
                 takes: TakeStarter | None = None, max_watchers: int = 10,
                 on_ended: Callable[["LiveSession", str], None] | None = None, owner_key: str | None = None,
                 sink: FrameSink | None = None, presenter: bool = False):
        self.id, self.plan, self.pc = session_id, plan, peer
        self.owner_key = owner_key       # issue 26: what its REST routes need (studio/server/access.py)
        self.presenter = presenter       # started with the admin token: OSC steers it (studio/server/osc.py)
        self.client: str | None = None   # the offering address (its offers still connecting are limited)
        self.codec: str | None = None    # negotiated with the owner's peer
        self._on_ended = on_ended        # on the event loop: the session should end (its peer or source went)
        timeline = LiveTimeline(plan.schedule)
        self.rollout = Rollout(source, timeline, render_session)
        buffer = FrameBuffer(render_session.chunk_size, loop, 1.0 / plan.fps)
        self.track = SessionVideoTrack(buffer, plan.fps, on_sent=self._on_sent)
        self.outbox = Outbox(loop)
        self.reports = SessionReports(self.track, plan.fps, observer, offered_at)
        width, height = render_session.width, render_session.height
        take_control = TakeControl(takes, self.outbox, source=plan.source, renderer=plan.renderer, width=width,
                                   height=height, fps=plan.fps, seed=render_session.seed)
        self.worker = SessionWorker(f"session-{session_id}", self.rollout, timeline, buffer, self.outbox,
                                    take_control, stamp=stamp, loop_playback=loop_playback, observer=observer,
                                    on_ended=lambda: self.outbox.later(
                                        lambda: self._gone("its source ended or failed")),
                                    sink=sink)   # an engine's own session: its frames go back to it as rendered
        parts = SessionParts(self.rollout, timeline, self.worker, take_control, plan.source, width, height,
                             self.stats, self.reports.frame_at)
        self.worker.before_chunk = parts.place_timed_again   # timed switches kept on their moment
        self.control = SessionControl(parts, self.outbox)
        self.audience = Audience(self, max_watchers)  # read-only peers sharing this session's encoded stream
        # RenderSession.on_lost: only a render worker's session (cluster/) calls it, when its worker died
        render_session.on_lost = lambda cause: self.outbox.later(lambda: self._lost(cause))
        if peer is not None:
            peer.on("datachannel", self._on_datachannel)
            peer.on("connectionstatechange", self._on_connection_state)

    # ---- what it is (read anywhere; its parts stay its own) ----------------------------------------------

    @property
    def state(self) -> str:
        return self.worker.state

    @property
    def source_name(self) -> str:
        return self.plan.source

    @property
    def renderer_name(self) -> str:
        return self.plan.renderer

    @property
    def fps(self) -> float:
        return self.plan.fps

    @property
    def width(self) -> int:
        return self.rollout.session.width

    @property
    def height(self) -> int:
        return self.rollout.session.height

    @property
    def host(self) -> str | None:
        """The render worker's host, under --cluster (None in-process)."""
        return self.rollout.session.host

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        return self.outbox.loop

    @property
    def buffer(self) -> FrameBuffer:
        return self.worker.buffer

    @property
    def takes(self) -> TakeControl:
        return self.worker.handover.takes

    @property
    def encoder(self):
        return self.reports.encoder

    @property
    def latest_frame(self) -> RenderedFrame | None:
        return self.worker.latest_frame

    @property
    def schedule(self) -> Schedule:
        """What it plays now, live switches included (replaced whole by the worker: safe to read anywhere)."""
        return self.control.parts.timeline.schedule

    @property
    def frame_index(self) -> int:
        return self.rollout.frame_index

    # ---- lifecycle -------------------------------------------------------------------------------------

    def start(self) -> None:
        self.worker.start()

    def negotiated(self, answer: SendOnlyAnswer, settings: EncoderSettings) -> None:
        """The owner's peer agreed on a codec: frames are encoded once per codec, for the owner and every
        watcher, with this session's encoder settings."""
        self.codec = answer.mime_type
        encoders = self.encode_with(settings)

        def install() -> None:  # first recv(): aiortc has not created its own encoder yet
            self.reports.encoder = encoders.install(answer.sender, answer.mime_type)
        self.track.on_first_recv = install

    def encode_with(self, settings: EncoderSettings):
        """The encoder settings of the session's stream, for its owner's peer and its watchers."""
        encoders = self.audience.fanout.encoders
        encoders.settings = settings
        return encoders

    async def close(self) -> None:
        """Stop the session, then close its peer. Safe to call twice."""
        await self.stop()
        if self.pc is not None:
            await close_peer(self.pc)

    async def stop(self) -> None:
        """Stop the worker and free the rollout (source, render session); the peer stays open. Its close can take
        tens of seconds (aiortc releases a TURN allocation with retries when the TURN server has gone), and the
        studio must not count the session as live meanwhile (SessionManager.end). Safe to call twice."""
        if self.state == "closed":
            return
        self.worker.stop()
        await self.audience.close()
        self.track.stop()
        stopped = await self.loop.run_in_executor(None, self.worker.join, 10)
        await self.takes.finish(self.loop)
        if stopped:
            await self.loop.run_in_executor(None, self.rollout.close)
        else:
            log.warning("session %s: worker did not stop within 10 s", self.id)

    def _gone(self, reason: str) -> None:
        if self._on_ended is not None and self.state != "closed":
            self._on_ended(self, reason)

    def _lost(self, cause: str) -> None:
        """Its render worker died: the viewer hears the cause (once, also when paused) and the session ends."""
        self.worker.fail(RendererError(cause, "cluster"))
        self._gone(cause)

    # ---- the peer and its data channel ----------------------------------------------------------------

    def _on_connection_state(self) -> None:
        if self.pc.connectionState in ("failed", "closed"):
            self._gone(f"connection {self.pc.connectionState}")

    def _on_datachannel(self, channel) -> None:
        self.attach_channel(channel)
        channel.on("close", lambda: self._gone("data channel closed"))

    def attach_channel(self, channel) -> None:
        """The owner's WebRTC data channel: its messages go to the control, the session's messages to it."""
        self.outbox.listener = to_data_channel(channel)
        channel.on("message", self.control.receive)
        channel.on("open", lambda: self.outbox.send(self.hello()))
        if channel.readyState == "open":
            self.outbox.send(self.hello())

    def attach_engine(self, channel: EngineChannel) -> None:
        """An engine's link in place of a data channel (studio/server/engine_link.py)."""
        self.outbox.listener = channel.deliver
        channel.control = self.control
        self.outbox.send(self.hello())

    def _on_sent(self, item: OutgoingFrame, sent_at: float) -> None:
        status = self.reports.frame_sent(item, sent_at, state=self.state, queued=self.buffer.queued,
                                         take=self.takes.progress())
        self.outbox.send(status)
        self.worker.frame_sent()
        self.audience.publish(item.video, status)

    # ---- answers -------------------------------------------------------------------------------------------

    def hello(self, watcher: bool = False) -> dc.Hello:
        """The owner's hello carries the watch key to share; a watcher's does not."""
        recorded = self.rollout.recorded
        return dc.Hello(session_id=self.id, source=self.source_name, renderer=self.renderer_name,
                        width=self.width, height=self.height, fps=self.fps, recorded=recorded,
                        frames=self.rollout.recorded_length,
                        live=isinstance(self.rollout.source, LiveSource), codec=self.codec,
                        watch=None if watcher else self.audience.share(), role="watcher" if watcher else None,
                        owner_key=None if watcher else self.owner_key)

    def stats(self) -> dc.StatsReport:
        return self.reports.stats(session_id=self.id, state=self.state, frame=self.rollout.frame_index,
                                  codec=self.codec, errors=self.outbox.errors)
