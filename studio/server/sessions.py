"""Live sessions of the studio: admission (the concurrency limit), building a session from an offer, WebRTC
negotiation, and freeing everything when the peer goes away."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
import uuid
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

from aiortc import RTCSessionDescription

from alaya_errors import UserError
from gbuffer.feed import FeedHub, FeedSource
from gbuffer.size import H264_RULE, Size
from gbuffer.source import Source
from renderer import RENDERERS, Renderer, check_size, create_renderer
from renderer.base import RendererError, RendererFull
from studio.rollout import Rollout
from studio.schedule import Schedule
from studio.server.allocator import return_free_memory
from studio.server.ice import close_peer, peer_connection, require_relay
from studio.server.metrics import SessionObserver
from studio.server.models import OfferAnswer, OfferRequest, SessionOptions
from studio.server.session import LiveSession
from studio.server.settings import Settings
from studio.server.tasks import TaskSet, cancel_and_wait
from studio.server.timeline import initial_schedule
from studio.sources import ENGINE_INPUTS, open_source
from studio.takes import TAKE_PREFIX
from webrtc.encoders import EncoderSettings, prefer_codecs
from webrtc.stamp import BITS, stamp_fits

log = logging.getLogger("alaya.sessions")


async def _receiver_report_age(sender) -> float:
    """Seconds since the peer's last RTCP receiver report about this sender (infinite before the first)."""
    for stats in (await sender.getStats()).values():
        if stats.type == "remote-inbound-rtp":
            return (datetime.now(timezone.utc) - stats.timestamp).total_seconds()
    return float("inf")


class OfferError(UserError):
    """An offer the studio cannot accept (bad SDP, size, source, renderer)."""


class StudioFull(Exception):
    """Every session slot is taken; answered with HTTP 503."""


@dataclass(frozen=True)
class SessionPlan:
    """Session options resolved against the server's settings: what a live session or a render job runs."""

    source: str
    renderer: str
    width: int
    height: int
    fps: float
    seed: int
    schedule: Schedule


class SessionManager:
    def __init__(self, settings: Settings, feeds: FeedHub):
        self.settings = settings
        self.feeds = feeds
        self.sessions: dict[str, LiveSession] = {}
        self.sessions_started = 0
        self.sessions_refused = 0
        self._pending = 0
        self._renderers: dict[str, Renderer] = {}
        self._renderer_lock = threading.Lock()
        self.observer: Callable[[str], SessionObserver] | None = None  # renderer name → what its sessions report to
        self.tasks = TaskSet("sessions")  # watchers and end() calls started from callbacks
        self.pool = None                  # render workers on Ray (cluster.pool.WorkerPool) with --cluster

    # ---- admission ---------------------------------------------------------------------------------------

    def _reserve(self) -> None:
        if len(self.sessions) + self._pending >= self.settings.max_sessions:
            self.sessions_refused += 1
            raise StudioFull(f"studio full: all {self.settings.max_sessions} session(s) are in use; "
                             "try again when someone leaves")
        self._pending += 1

    def plan(self, options: SessionOptions, stamp: bool = False) -> SessionPlan:
        """The one resolution of source, size, renderer, frame rate and schedule, for offers and render jobs
        alike (so a render of a session's timeline matches what the session showed)."""
        s = self.settings
        renderer = options.renderer or s.renderer
        if renderer not in RENDERERS:
            raise OfferError(f"unknown renderer {renderer!r}; choose one of {', '.join(RENDERERS)}", "renderer")
        size = Size.parse(options.size, "size") if options.size is not None else Size(s.width, s.height)
        if not (16 <= size.width <= s.max_width and 16 <= size.height <= s.max_height):
            raise OfferError(f"{size} must be between 16x16 and {s.max_width}x{s.max_height}", "size")
        size.require_multiple(2, H264_RULE)
        check_size(renderer, *size)
        if stamp and not stamp_fits(*size):
            raise OfferError(f"{size} is too small for the frame stamp (at least {BITS * 4}x8)", "stamp")
        take = self.settings.takes.open(options.source[len(TAKE_PREFIX):]) if options.source.startswith(
            TAKE_PREFIX) else None
        if take is not None and options.schedule is None and options.prompt is None:
            schedule = take.schedule        # a take replays with its switches where they were played
        else:
            schedule = initial_schedule(options.schedule, options.prompt, options.fps or s.fps)
        # a schedule carries its own frame rate (its frames are the stream's frames)
        fps = options.fps or (schedule.fps if options.schedule is not None or take is not None else s.fps)
        if fps > s.max_fps:
            raise OfferError(f"{fps:g} fps is above this studio's cap of {s.max_fps:g}", "fps")
        return SessionPlan(options.source, renderer, size.width, size.height, fps, options.seed, schedule)

    # ---- building ----------------------------------------------------------------------------------------

    def renderer(self, name: str) -> Renderer:
        """One renderer object per backend, shared; each session opens its own RenderSession. With batching on,
        its sessions share forward passes (a batch thread per backend); with a worker pool, the default
        renderer's sessions render on the pool's workers."""
        with self._renderer_lock:
            if name not in self._renderers and self.pool is not None and name == self.settings.renderer:
                from cluster.remote import RemoteRenderer

                self._renderers[name] = RemoteRenderer(self.pool)
            if name not in self._renderers:
                options = self.settings.renderer_options if name == self.settings.renderer else {}
                renderer = create_renderer(name, **options)
                if self.settings.batch_wait_ms is not None:
                    from renderer.batching import BatchedRenderer, batch_function

                    renderer = BatchedRenderer(renderer, batch_function(name),
                                               max_wait_s=self.settings.batch_wait_ms / 1e3,
                                               max_batch=self.settings.max_batch)
                self._renderers[name] = renderer
            return self._renderers[name]

    def loaded_renderer(self, name: str) -> Renderer | None:
        with self._renderer_lock:
            return self._renderers.get(name)

    def use_renderer(self, name: str, renderer: Renderer) -> None:
        """Serve backend `name` (one of RENDERERS) with this object: a model loaded elsewhere, or in tests a
        renderer that fails on purpose."""
        with self._renderer_lock:
            self._renderers[name] = renderer

    def open_source(self, plan: SessionPlan, session_id: str) -> Source:
        name = plan.source
        if name.startswith("feed:"):
            return FeedSource(self.feeds.get(name[5:]), session_id, self.settings.feed_idle_timeout_s)
        if name in ENGINE_INPUTS:
            return open_source([name], width=plan.width, height=plan.height, fps=plan.fps, seed=plan.seed)
        if name.startswith(TAKE_PREFIX):
            return open_source([str(self.settings.takes.open(name[len(TAKE_PREFIX):]).input)], fps=plan.fps)
        if self.settings.data_dir is None:
            raise OfferError(f"{name!r} is not 'demo', 'engine' or 'feed:NAME', and this studio serves no "
                             "recorded sequences (start it with --data-dir)", "source")
        root = Path(self.settings.data_dir).resolve()
        try:
            path = (root / name).resolve()
        except (ValueError, OSError):  # a NUL byte in the name, a symlink loop: refused below
            path = root
        # the root itself is no sequence either (opening it would echo the server's path in the error)
        if path == root or not path.is_relative_to(root) or not path.exists():
            raise OfferError(f"no sequence {name!r} in the data directory", "source")
        return open_source([str(path)], fps=plan.fps)

    def build_rollout(self, plan: SessionPlan, session_id: str) -> Rollout:
        """Blocking (renderer loading, GL setup): runs in a worker thread."""
        renderer = self.renderer(plan.renderer)
        source = self.open_source(plan, session_id)
        try:
            render_session = renderer.open_session(plan.width, plan.height, plan.seed)
        except RendererFull as exc:       # every render worker is full: 503 with Retry-After, as a full studio
            source.close()
            self.sessions_refused += 1
            raise StudioFull(str(exc)) from None
        except BaseException:
            source.close()
            raise
        return Rollout(source, plan.schedule, render_session)

    # ---- offers ------------------------------------------------------------------------------------------

    async def offer(self, req: OfferRequest) -> OfferAnswer:
        offered_at = time.perf_counter()
        self._reserve()
        try:
            plan = self.plan(req, stamp=req.stamp)
            if "m=video" not in req.sdp:
                raise OfferError("the offer has no video m-line; add a recvonly video transceiver", "sdp")
            session_id = uuid.uuid4().hex[:12]
            loop = asyncio.get_running_loop()
            rollout = await loop.run_in_executor(None, self.build_rollout, plan, session_id)
            session = LiveSession(session_id, rollout, fps=plan.fps, source_name=plan.source,
                                  renderer_name=plan.renderer, stamp=req.stamp, loop_playback=req.loop, loop=loop,
                                  observer=self.observer(plan.renderer) if self.observer else None,
                                  offered_at=offered_at, takes=self.settings.takes,
                                  max_watchers=self.settings.max_watchers)
            session.on_closed = lambda s: self.sessions.pop(s.id, None)
            session.on_ended = lambda s: loop.call_soon_threadsafe(self._end_soon, s, "its source ended or failed")
            if hasattr(rollout.session, "on_lost"):     # a render worker's session (cluster/): its worker died
                rollout.session.on_lost = lambda cause, s=session: loop.call_soon_threadsafe(self._lost, s, cause)
            # the worker starts now, so the first frame (an engine's GL start-up, a model's first chunk) renders
            # while the peers negotiate, not after: time to first frame
            session.start()
            try:
                answer = await self._negotiate(session, req, plan)
            except BaseException:
                await session.close()
                raise
            self.sessions[session_id] = session
            self.sessions_started += 1
            session.watcher = self.tasks.spawn(self._watch(session), name=f"watch-{session_id}")
            return answer
        finally:
            self._pending -= 1

    async def _negotiate(self, session: LiveSession, req: OfferRequest, plan: SessionPlan) -> OfferAnswer:
        pc = peer_connection(self.settings.ice, session.id)
        session.pc = pc
        transceiver = pc.addTransceiver(session.track, direction="sendonly")
        prefer_codecs(transceiver)

        @pc.on("datachannel")
        def _on_datachannel(channel) -> None:
            session.attach_channel(channel)

            @channel.on("close")
            def _on_channel_close() -> None:
                self._end_soon(session, "data channel closed")

        @pc.on("connectionstatechange")
        def _on_state() -> None:
            if pc.connectionState in ("failed", "closed"):
                self._end_soon(session, f"connection {pc.connectionState}")

        try:
            await pc.setRemoteDescription(RTCSessionDescription(sdp=req.sdp, type="offer"))
            await pc.setLocalDescription(await pc.createAnswer())
        except Exception as exc:
            await close_peer(pc)
            raise OfferError(f"the SDP offer could not be used: {exc}".splitlines()[0], "sdp") from None
        await require_relay(pc, self.settings.ice)
        codec = transceiver._codecs[0]  # negotiated, in our preference order
        session.codec = codec.mimeType
        encoders = session.audience.fanout.encoders  # one encode per codec for the owner and every watcher
        encoders.settings = EncoderSettings.for_session(plan.width, plan.height, plan.fps, req.bitrate)

        def _install() -> None:  # first recv(): aiortc has not created its own encoder yet
            session.encoder = encoders.install(transceiver.sender, codec.mimeType)
        session.track.on_first_recv = _install
        return OfferAnswer(sdp=pc.localDescription.sdp, type="answer", session_id=session.id)

    async def _watch(self, session: LiveSession) -> None:
        """End sessions whose peer never connects or silently went away (a killed tab sends no goodbye, and
        ICE consent checks would take ~30 s to notice): a receiving browser sends RTCP receiver reports about
        every second, so while we are sending, `peer_timeout_s` without one means nobody is watching."""
        started = time.monotonic()
        sender = session.pc.getTransceivers()[0].sender
        while session.state != "closed":
            await asyncio.sleep(1.0)
            pc = session.pc
            if pc.connectionState != "connected":
                if time.monotonic() - started > self.settings.connect_timeout_s:
                    await self.end(session, "never connected")
                continue
            # judged only over a stretch of continuous sending: a pause or a slow chunk sends nothing to report on
            streaming = session.track.streaming_for()
            if streaming > self.settings.peer_timeout_s:
                silence = min(streaming, await _receiver_report_age(sender))
                if silence > self.settings.peer_timeout_s:
                    await self.end(session, f"no receiver report for {silence:.0f} s")

    def _lost(self, session: LiveSession, cause: str) -> None:
        """Its render worker died: the viewer hears the cause (once, also when paused) and the session ends."""
        session.fail(RendererError(cause, "cluster"))
        self._end_soon(session, cause)

    def _end_soon(self, session: LiveSession, reason: str) -> None:
        """end() from a callback that cannot await (aiortc events; the worker, via call_soon_threadsafe)."""
        if session.state != "closed":
            self.tasks.spawn(self.end(session, reason), name=f"end-{session.id}")

    async def end(self, session: LiveSession, reason: str) -> None:
        if session.state == "closed":
            return
        log.info("session %s ends: %s", session.id, reason)
        await session.close()
        await cancel_and_wait(session.watcher)
        pc = getattr(session, "pc", None)
        if pc is not None:
            await pc.close()
        # issue 29: what the session freed goes back to the system, not into the allocator's arenas for good
        await asyncio.get_running_loop().run_in_executor(None, return_free_memory)

    async def close_all(self) -> None:
        await asyncio.gather(*(self.end(s, "server shutting down") for s in list(self.sessions.values())))
        await self.tasks.close()
        with self._renderer_lock:
            renderers = list(self._renderers.values())
        for renderer in renderers:            # batch threads (renderer/batching.py) stop with the server
            close = getattr(renderer, "close", None)
            if close is not None:
                await asyncio.get_running_loop().run_in_executor(None, close)
