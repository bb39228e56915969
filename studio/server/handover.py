"""A live session's hand-over: each rendered frame, as the renderer produces it, goes to the video track's buffer
(which the owner and every watcher are sent from), to the take being recorded, and for an engine's own session
back to the engine first (`EngineSink`).

It runs on the session's worker (or its second stage, studio/server/chunk_stage.py) and never decides anything
about playback: the worker says, through `current()`, whether the chunk it hands over is still wanted.
"""

from __future__ import annotations

import time
from typing import Callable, Iterator

import numpy as np

from gbuffer.formats.pictures import yuv420p
from gbuffer.source import LiveSource, Source
from timeline.rollout import RenderedFrame
from studio.server.metrics import SessionObserver
from studio.server.reports import ChunkClock, frame_info
from studio.server.take_control import TakeControl
from webrtc.stamp import stamp_index
from webrtc.track import FrameBuffer, OutgoingFrame

FrameSink = Callable[[RenderedFrame, np.ndarray], None]   # a rendered frame and its RGB as handed over
Current = Callable[[], bool]   # → False once the chunk is stale (a seek) or the session stops


class EngineSink:
    """An engine's own session (studio/server/engine_link.py): each frame goes to the engine as it is rendered,
    and the engine's frames pace the session; the video track (watchers) takes the newest, never waited for."""

    def __init__(self, send: FrameSink):
        self.send = send

    @staticmethod
    def frame_ready(source: Source) -> bool:
        """Whether the engine's next frame is in (waits 50 ms, so the worker's commands still apply meanwhile)."""
        return not isinstance(source, LiveSource) or source.frame_ready(0.05)

    @staticmethod
    def put_newest(buffer: FrameBuffer, item: OutgoingFrame) -> None:
        if not buffer.put(item, timeout=0):
            buffer.clear()
            buffer.put(item, timeout=0)


class FrameHandOver:
    def __init__(self, buffer: FrameBuffer, takes: TakeControl, *, stamp: bool, sink: EngineSink | None,
                 observer: SessionObserver | None):
        self.buffer, self.takes, self.sink, self.observer = buffer, takes, sink, observer
        self.stamp = stamp              # read per frame: a `stamp` command changes it from the next one
        # The newest rendered frame (G-buffer + output), for the inspector; replaced whole, so readers on other
        # threads always see a complete frame.
        self.latest_frame: RenderedFrame | None = None

    def parts(self, parts: Iterator[list[RenderedFrame]], clock: ChunkClock, current: Current,
              waiting: Callable[[], None] | None = None, owed: list[int] | None = None) -> tuple[float, float]:
        """Hand each part over as the renderer produces it (a flash chunk: each latent frame's frames as soon as
        it is decoded); → (the seconds spent rendering, not waiting for the hand-over; those until the first part
        was ready). Once `current()` says the chunk is stale, the rest is still rendered (so the session's state
        stays whole) and not handed over. `waiting`: run while a frame waits for room (the worker applies its
        commands then: they only change what the *next* chunk renders). `owed`: on the second stage, the
        chunk's frames promised to the buffer and not put yet (counted down)."""
        render_s, first_s = 0.0, None
        handing = True
        while True:
            t = time.perf_counter()
            part = next(parts, None)
            render_s += time.perf_counter() - t
            if first_s is None:
                first_s = render_s
            if part is None:
                return render_s, first_s
            handing = handing and current()
            if handing:
                handing = self._chunk(part, clock, current, waiting, owed)

    def note_chunk(self, count: int, period_s: float, first_s: float, rendered_s: float) -> None:
        self.buffer.note_production(count, period_s, first_s)
        if self.observer is not None:
            self.observer.chunk_rendered(rendered_s)

    def _chunk(self, chunk: list[RenderedFrame], clock: ChunkClock, current: Current,
               waiting: Callable[[], None] | None, owed: list[int] | None) -> bool:
        self.latest_frame = chunk[-1]
        take = self.takes.recorder
        for f in chunk:
            rgb = stamp_index(f.rgb, f.index) if self.stamp else f.rgb
            if self.sink is not None:
                self.sink.send(f, rgb)           # first: the engine waits for it, the watchers' video does not
            video = yuv420p(rgb)
            item = OutgoingFrame(f.index, video, clock.started, frame_info(f, clock))
            if clock.first_ready_s is None:
                clock.first_ready_s = time.perf_counter() - clock.started
            if self.sink is not None:
                self.sink.put_newest(self.buffer, item)
            elif not self._put(item, current, waiting, owed):
                return False
            if take is not None:   # what was handed to the viewer, in that order
                take.add(f.gbuffer, rgb, f.conditioning, f.index)
        return True

    def _put(self, item: OutgoingFrame, current: Current, waiting: Callable[[], None] | None,
             owed: list[int] | None) -> bool:
        """Wait for room in the buffer; False when the session stops or the chunk went stale meanwhile."""
        while not self.buffer.put(item, timeout=0.05, settles=owed is not None):
            if self.buffer.closed or not current():
                return False
            if waiting is not None:
                waiting()
            if not current():
                return False
        if owed is not None:
            owed[0] -= 1
        return True
