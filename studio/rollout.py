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
from renderer.base import RenderSession


class ConditioningTimeline(Protocol):
    """Anything that maps a timeline frame to conditioning (a Schedule does)."""

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
    """Owns a source, a schedule and a render session. Not thread-safe: one caller at a time; replacing
    `schedule` from another thread is fine (it is read once per chunk)."""

    def __init__(self, source: Source, schedule: ConditioningTimeline, session: RenderSession):
        self.source = source
        self.schedule = schedule
        self.session = session
        self.frame_index = source.position if isinstance(source, RecordedSource) else 0
        self._frames: Iterator[GBufferFrame] = iter(source)

    @property
    def recorded(self) -> bool:
        return isinstance(self.source, RecordedSource)

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
        frames = self._take(self.session.chunk_size)
        if not frames:
            return []
        schedule = self.schedule
        conds = [schedule.conditioning_at(self.frame_index + i) for i in range(len(frames))]
        t0 = time.perf_counter()
        result = self.session.render(frames, conds)
        timings = dict(result.timings_ms)
        timings.setdefault("total", (time.perf_counter() - t0) * 1e3)
        out = [RenderedFrame(self.frame_index + i, result.rgb[i], f, c, timings, len(frames),
                             result.peak_memory_bytes)
               for i, (f, c) in enumerate(zip(frames, conds))]
        self.frame_index += len(frames)
        return out

    def close(self) -> None:
        self.session.close()
        self.source.close()
