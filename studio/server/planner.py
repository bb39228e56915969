"""Planning a session: its options resolved against the studio's settings (source, size, renderer, frame rate,
schedule), and the renderers and sources it runs on. Live sessions and offline render jobs share it, so a render
of a session's timeline matches what the session showed."""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from alaya_errors import UserError
from gbuffer.feed import FeedHub, FeedSource
from gbuffer.size import H264_RULE, Size
from gbuffer.source import Source
from renderer import RENDERERS, Renderer, check_size, create_renderer
from renderer.base import RenderSession
from timeline.rollout import Rollout
from timeline.schedule import Schedule, ScheduleError, schedule_from_value
from studio.server.models import SessionOptions
from studio.server.settings import Settings
from studio.sources import ENGINE_INPUTS, open_source
from studio.takes import TAKE_PREFIX
from webrtc.stamp import BITS, stamp_fits

DEFAULT_PROMPT = "cyberpunk"
log = logging.getLogger("alaya.server")


class OfferError(UserError):
    """Session options the studio cannot accept (size, source, renderer, frame rate)."""


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


def initial_schedule(schedule: dict[str, Any] | str | None, prompt: str | None, fps: float) -> Schedule:
    """What the options ask for: a schedule (JSON object, built-in name, keyframe/Parseq text) or one prompt."""
    if schedule is not None and prompt is not None:
        raise ScheduleError("give 'schedule' or 'prompt', not both", "offer")
    if schedule is not None:
        return schedule_from_value(schedule, "schedule")
    return Schedule.single(prompt or DEFAULT_PROMPT, fps=fps)


class SessionPlanner:
    def __init__(self, settings: Settings, feeds: FeedHub):
        self.settings = settings
        self.feeds = feeds
        self.pool = None                  # render workers on Ray (cluster.pool.WorkerPool) with --cluster
        self._renderers: dict[str, Renderer] = {}
        self._renderer_lock = threading.Lock()
        self.warmed = threading.Event()   # warm_up() is over: /api/health says `ready`

    def plan(self, options: SessionOptions, stamp: bool = False) -> SessionPlan:
        """The one resolution of source, size, renderer, frame rate and schedule, for offers and render jobs."""
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
        take = s.takes.open(options.source[len(TAKE_PREFIX):]) if options.source.startswith(TAKE_PREFIX) else None
        if take is not None and options.schedule is None and options.prompt is None:
            schedule = take.schedule        # a take replays with its switches where they were played
        else:
            schedule = initial_schedule(options.schedule, options.prompt, options.fps or s.fps)
        # a schedule carries its own frame rate (its frames are the stream's frames)
        fps = options.fps or (schedule.fps if options.schedule is not None or take is not None else s.fps)
        if fps > s.max_fps:
            raise OfferError(f"{fps:g} fps is above this studio's cap of {s.max_fps:g}", "fps")
        return SessionPlan(options.source, renderer, size.width, size.height, fps, options.seed, schedule)

    def warm_up(self) -> None:
        """Pay the default session's one-off costs before the studio says it is ready, so its first visitor does
        not: the default renderer loaded, then one frame of the default session (what an offer with no options
        gets) rendered and thrown away, which opens the GL contexts, compiles the default style's programs,
        makes the default size's targets and builds the engine's world once; and libx264 opened once. Errors
        are left to the first offer that meets them (a 4xx there); `warmed` is set either way."""
        try:
            self.renderer(self.settings.renderer)
            if self.pool is None:          # render workers warm up on their own
                plan = self.plan(SessionOptions())
                source, session = self.open(plan, "warm-up")
                rollout = Rollout(source, plan.schedule, session)
                try:
                    frames = rollout.next_chunk()
                finally:
                    rollout.close()
                _warm_encoder(frames[0].rgb if frames else None)
        except Exception as exc:  # noqa: BLE001 - said again, as one line, by the offer that needs it
            log.warning("warm-up of renderer %r incomplete: %s", self.settings.renderer, exc)
        finally:
            self.warmed.set()

    # ---- renderers -----------------------------------------------------------------------------------------

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

    def loaded_renderers(self) -> list[Renderer]:
        with self._renderer_lock:
            return list(self._renderers.values())

    # ---- sources -------------------------------------------------------------------------------------------

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

    def open(self, plan: SessionPlan, session_id: str) -> tuple[Source, RenderSession]:
        """The plan's source and a render session of its renderer. Blocking (renderer loading, GL setup): runs
        in a worker thread. A full renderer raises RendererFull, with the source closed again."""
        renderer = self.renderer(plan.renderer)
        source = self.open_source(plan, session_id)
        try:
            return source, renderer.open_session(plan.width, plan.height, plan.seed)
        except BaseException:
            source.close()
            raise


def _warm_encoder(rgb) -> None:
    """Encode one frame with the live sessions' H.264 encoder: loads libx264's code and tables once."""
    import fractions

    import av
    import numpy as np

    from webrtc.encoders import EncoderSettings, make_encoder

    picture = rgb if rgb is not None else np.zeros((224, 416, 3), np.uint8)
    frame = av.VideoFrame.from_ndarray(np.ascontiguousarray(picture), format="rgb24")
    frame.pts, frame.time_base = 0, fractions.Fraction(1, 90_000)
    make_encoder("video/H264", EncoderSettings()).encode(frame)

