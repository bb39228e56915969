"""Live sessions of the studio over WebRTC: admission (the concurrency limit), a session from an offer, the
watchdog on its peer, and freeing everything when the peer goes away. What a session runs (source, size,
renderer, schedule) is planned by `SessionPlanner`, which render jobs share."""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections import Counter
from datetime import datetime, timezone
from typing import Callable

from gbuffer.feed import FeedHub
from gbuffer.source import Source
from renderer import Renderer
from renderer.base import RendererFull
from studio.server.access import Ownership
from studio.server.allocator import return_free_memory
from studio.server.ice import peer_connection, require_relay
from studio.server.metrics import SessionObserver
from studio.server.models import OfferAnswer, OfferRequest, SessionOptions
from studio.server.parsing import PARSERS, ParsersBusy
from studio.server.planner import SessionPlan, SessionPlanner
from studio.server.session import LiveSession
from studio.server.worker import FrameSink
from studio.server.settings import Settings, is_loopback
from studio.server.tasks import TaskSet, cancel_and_wait
from webrtc.answer import answer_sendonly, require_video
from webrtc.encoders import EncoderSettings

log = logging.getLogger("alaya.sessions")


async def _receiver_report_age(sender) -> float:
    """Seconds since the peer's last RTCP receiver report about this sender (infinite before the first)."""
    for stats in (await sender.getStats()).values():
        if stats.type == "remote-inbound-rtp":
            return (datetime.now(timezone.utc) - stats.timestamp).total_seconds()
    return float("inf")


class StudioFull(Exception):
    """Every session slot is taken; answered with HTTP 503."""


class PendingOffers(Exception):
    """This address has as many offers still connecting as it may; answered with HTTP 429."""


class SessionManager:
    def __init__(self, settings: Settings, feeds: FeedHub):
        self.settings = settings
        self.feeds = feeds
        self.planner = SessionPlanner(settings, feeds)
        self.sessions: dict[str, LiveSession] = {}
        self.sessions_started = 0
        self.sessions_refused = 0
        self._pending = 0
        self._offering: Counter[str] = Counter()   # offers being answered, by address
        self._watchdogs: dict[str, asyncio.Task] = {}
        self.observer: Callable[[str], SessionObserver] | None = None  # renderer name → what its sessions report to
        self.tasks = TaskSet("sessions")  # watchdogs and end() calls started from callbacks

    # ---- planning, shared with render jobs (the planner's; kept here for the routes that call them) --------

    @property
    def pool(self):
        """Render workers on Ray (cluster.pool.WorkerPool) with --cluster."""
        return self.planner.pool

    @pool.setter
    def pool(self, pool) -> None:
        self.planner.pool = pool

    def plan(self, options: SessionOptions, stamp: bool = False) -> SessionPlan:
        return self.planner.plan(options, stamp)

    async def _plan(self, options: SessionOptions, stamp: bool = False) -> SessionPlan:
        """plan() off the event loop (issue 42: a schedule from a stranger is parsed on the bounded parse pool)."""
        try:
            return await PARSERS.run(self.planner.plan, options, stamp)
        except ParsersBusy as exc:
            self.sessions_refused += 1
            raise StudioFull(str(exc)) from None

    def renderer(self, name: str) -> Renderer:
        return self.planner.renderer(name)

    def loaded_renderer(self, name: str) -> Renderer | None:
        return self.planner.loaded_renderer(name)

    def use_renderer(self, name: str, renderer: Renderer) -> None:
        self.planner.use_renderer(name, renderer)

    def open_source(self, plan: SessionPlan, session_id: str) -> Source:
        return self.planner.open_source(plan, session_id)

    # ---- offers ------------------------------------------------------------------------------------------

    def _limit_client(self, client: str | None) -> None:
        """At most `max_pending_per_client` offers of one address waiting to connect: 50 quick offers that never
        connect held every slot for their deadline (issue 42). Loopback is the studio's own machine (and what a
        reverse proxy looks like: put the limit in the proxy then)."""
        if client is None or (is_loopback(client) and not self.settings.pending_limit_on_loopback):
            return
        waiting = sum(1 for s in self.sessions.values() if s.client == client and s.pc is not None
                      and s.pc.connectionState != "connected") + self._offering.get(client, 0)
        if waiting >= self.settings.max_pending_per_client:
            self.sessions_refused += 1
            raise PendingOffers(f"{waiting} offers from your address are still connecting; wait for them to "
                                "connect or end (at most "
                                f"{self.settings.max_pending_per_client})")

    def _reserve(self) -> None:
        if len(self.sessions) + self._pending >= self.settings.max_sessions:
            self.sessions_refused += 1
            raise StudioFull(f"studio full: all {self.settings.max_sessions} session(s) are in use; "
                             "try again when someone leaves")
        self._pending += 1

    async def offer(self, req: OfferRequest, owner: Ownership | None = None, client: str | None = None
                    ) -> OfferAnswer:
        """`owner` (issue 26): the visitor's key and takes; without one only the admin token controls it.
        `client`: the offering address, for its limit of offers still connecting."""
        offered_at = time.perf_counter()
        require_video(req.sdp)          # the cheap check first (issue 42): no schedule is parsed for a bad SDP
        self._limit_client(client)
        self._reserve()
        if client is not None:
            self._offering[client] += 1
        try:
            plan = await self._plan(req, stamp=req.stamp)
            session = await self._start(plan, owner, lambda sid: peer_connection(self.settings.ice, sid),
                                        offered_at=offered_at, stamp=req.stamp, loop_playback=req.loop)
            try:
                answer = await answer_sendonly(session.pc, session.track, req.sdp)
                await require_relay(session.pc, self.settings.ice)
            except BaseException:
                await session.close()
                raise
            session.negotiated(answer, EncoderSettings.for_session(plan.width, plan.height, plan.fps, req.bitrate))
            session.client = client
            self._admit(session)
            self._watchdogs[session.id] = self.tasks.spawn(self._watch(session), name=f"watch-{session.id}")
            return OfferAnswer(sdp=answer.sdp, type="answer", session_id=session.id, owner_key=session.owner_key)
        finally:
            self._pending -= 1
            if client is not None:
                self._offering[client] -= 1
                if not self._offering[client]:
                    del self._offering[client]

    async def start_for_engine(self, options: SessionOptions, owner: Ownership, sink: FrameSink,
                               channel) -> LiveSession:
        """A session an engine owns (studio/server/engine_link.py): no peer; `sink` gets each frame as it is
        rendered, `channel` stands for its data channel. The same limits as a visitor's; browsers watch it
        through its watch link."""
        self._reserve()
        try:
            plan = await self._plan(options)
            session = await self._start(plan, owner, None, sink=sink, channel=channel)
            session.encode_with(EncoderSettings.for_session(plan.width, plan.height, plan.fps))
            self._admit(session)
            return session
        finally:
            self._pending -= 1

    async def _start(self, plan: SessionPlan, owner: Ownership | None, peer: Callable[[str], object] | None, *,
                     offered_at: float | None = None, stamp: bool = False, loop_playback: bool = True,
                     sink: FrameSink | None = None, channel=None) -> LiveSession:
        """A started session of `plan` (its worker renders while its peer, if any, negotiates)."""
        session_id = uuid.uuid4().hex[:12]
        loop = asyncio.get_running_loop()
        try:
            source, render_session = await loop.run_in_executor(None, self.planner.open, plan, session_id)
        except RendererFull as exc:   # every render worker is full: 503 with Retry-After, as a full studio
            self.sessions_refused += 1
            raise StudioFull(str(exc)) from None
        session = LiveSession(session_id, plan, source, render_session, peer(session_id) if peer else None,
                              loop=loop, stamp=stamp, loop_playback=loop_playback,
                              observer=self.observer(plan.renderer) if self.observer else None,
                              offered_at=offered_at, max_watchers=self.settings.max_watchers,
                              on_ended=self._end_soon, owner_key=owner.key if owner else None,   # issue 26
                              takes=owner.takes if owner else self.settings.takes, sink=sink,
                              presenter=owner.presenter if owner else False)
        if channel is not None:
            session.attach_engine(channel)
        # the worker starts now, so the first frame (an engine's GL start-up, a model's first chunk) renders
        # while the peers negotiate, not after: time to first frame
        session.start()
        return session

    def _admit(self, session: LiveSession) -> None:
        self.sessions[session.id] = session
        self.sessions_started += 1

    async def _watch(self, session: LiveSession) -> None:
        """End sessions whose peer never connects or silently went away (a killed tab sends no goodbye, and
        ICE consent checks would take ~30 s to notice): a receiving browser sends RTCP receiver reports about
        every second, so while we are sending, `peer_timeout_s` without one means nobody is watching."""
        started = time.monotonic()
        sender = session.pc.getTransceivers()[0].sender
        while session.state != "closed":
            await asyncio.sleep(1.0)
            if session.pc.connectionState != "connected":
                if time.monotonic() - started > self.settings.connect_timeout_s:
                    await self.end(session, "never connected")
                continue
            # judged only over a stretch of continuous sending: a pause or a slow chunk sends nothing to report on
            streaming = session.track.streaming_for()
            if streaming > self.settings.peer_timeout_s:
                silence = min(streaming, await _receiver_report_age(sender))
                if silence > self.settings.peer_timeout_s:
                    await self.end(session, f"no receiver report for {silence:.0f} s")

    # ---- ending ------------------------------------------------------------------------------------------

    def _end_soon(self, session: LiveSession, reason: str) -> None:
        """end() from a callback that cannot await (aiortc events; the worker, through the event loop)."""
        if session.state != "closed":
            self.tasks.spawn(self.end(session, reason), name=f"end-{session.id}")

    async def end(self, session: LiveSession, reason: str) -> None:
        if session.state == "closed":
            return
        log.info("session %s ends: %s", session.id, reason)
        await session.stop()
        self.sessions.pop(session.id, None)
        await cancel_and_wait(self._watchdogs.pop(session.id, None))
        await session.close()    # the peer, last: slow when its TURN server has gone
        # issue 29: what the session freed goes back to the system, not into the allocator's arenas for good
        await asyncio.get_running_loop().run_in_executor(None, return_free_memory)

    async def close_all(self) -> None:
        await asyncio.gather(*(self.end(s, "server shutting down") for s in list(self.sessions.values())))
        await self.tasks.close()
        for renderer in self.planner.loaded_renderers():   # batch threads (renderer/batching.py) stop with the server
            close = getattr(renderer, "close", None)
            if close is not None:
                await asyncio.get_running_loop().run_in_executor(None, close)
