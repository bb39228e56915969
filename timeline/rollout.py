"""The rollout loop: source → per-frame conditioning from the schedule → render session, chunk by chunk.

Synchronous and single-threaded on purpose: the offline renderer calls it directly, the server runs one per
session in a worker thread. The timeline frame (what the schedule is indexed by) is the source position for
recorded sources and a running count for live ones.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Iterator, Protocol

import numpy as np

from gbuffer.frame import GBufferError, GBufferFrame
from gbuffer.source import RecordedSource, Source
from prompt_presets.conditioning import Conditioning
from renderer.base import RenderResult, RenderSession


class ConditioningTimeline(Protocol):
    """Anything that maps a timeline frame to conditioning: a Schedule, or a live session's LiveTimeline
    (timeline/schedule/live.py), which also takes edits while it plays."""

    def conditioning_at(self, frame: int) -> Conditioning: ...


@dataclass
class RenderedFrame:
    index: int                     # timeline frame
    rgb: np.ndarray                # uint8 (H, W, 3)
    gbuffer: GBufferFrame
    conditioning: Conditioning
    chunk_timings_ms: dict[str, float] = field(default_factory=dict)  # for the whole chunk it came from
    chunk_size: int = 1
    peak_memory_bytes: int | None = None


class Rollout:
    """Owns a source, a timeline and a render session. Not thread-safe: one caller at a time (a live session
    edits its timeline from the same worker thread, between chunks)."""

    def __init__(self, source: Source, schedule: ConditioningTimeline, session: RenderSession):
        self.source = source
        self.schedule = schedule
        self.session = session
        self.frame_index = source.position if isinstance(source, RecordedSource) else 0
        self._frames: Iterator[GBufferFrame] = iter(source)
        self.take_s = 0.0   # how long the last chunk's frames took to come from the source (a live engine renders them)

    @property
    def recorded(self) -> bool:
        return isinstance(self.source, RecordedSource)

    @property
    def recorded_length(self) -> int | None:
        """Frames in a recorded source; None for a live one."""
        return len(self.source) if isinstance(self.source, RecordedSource) else None

    def seek(self, frame: int) -> None:
        """Jump a recorded source to `frame` (the timeline follows); history of the session carries on."""
        if not isinstance(self.source, RecordedSource):
            raise GBufferError("seeking needs a recorded source; this one is live", self.source.name)
        self.source.seek(frame)
        self.frame_index = frame
        self._frames = iter(self.source)

    def _take(self, n: int) -> list[GBufferFrame]:
        frames = []
        for frame in self._frames:
            frames.append(frame)
            if len(frames) == n:
                break
        return frames

    def next_chunk(self) -> list[RenderedFrame]:
        """Render the next chunk; [] when a recorded source is exhausted."""
        _, parts = self.next_chunk_parts()
        return [frame for part in parts for frame in part]

    def next_chunk_parts(self) -> tuple[int, Iterator[list[RenderedFrame]]]:
        """Take the next chunk's frames and their conditioning now (the timeline moves on at once), and return
        (how many, the rendered frames in parts as the renderer produces them: RenderSession.render_stream).
        (0, nothing) when a recorded source is exhausted. The parts must be read to the end."""
        return self._next_chunk(self.session.render_stream)

    def begin_chunk(self) -> tuple[int, Iterator[list[RenderedFrame]]]:
        """As next_chunk_parts, but the session's share of the chunk that the next chunk depends on is done now
        (RenderSession.begin_chunk); where the session overlaps chunks, the parts may be read on another thread
        while the next chunk begins."""
        return self._next_chunk(self.session.begin_chunk)

    def _next_chunk(self, render) -> tuple[int, Iterator[list[RenderedFrame]]]:
        taking = time.perf_counter()
        frames = self._take(self.session.chunk_size)
        self.take_s = time.perf_counter() - taking
        if not frames:
            return 0, iter(())
        schedule = self.schedule
        start = self.frame_index
        conds = [schedule.conditioning_at(start + i) for i in range(len(frames))]
        self.frame_index += len(frames)
        t0 = time.perf_counter()
        return len(frames), self._parts(render(frames, conds), frames, conds, start, t0)

    @staticmethod
    def _parts(results: Iterator[RenderResult], frames: list[GBufferFrame], conds: list[Conditioning],
               start: int, t0: float) -> Iterator[list[RenderedFrame]]:
        done = 0
        for result in results:
            timings = dict(result.timings_ms)
            timings.setdefault("total", (time.perf_counter() - t0) * 1e3)
            n = len(result.rgb)
            yield [RenderedFrame(start + done + i, result.rgb[i], frames[done + i], conds[done + i], timings,
                                 len(frames), result.peak_memory_bytes) for i in range(n)]
            done += n

    def close(self) -> None:
        self.session.close()
        self.source.close()
