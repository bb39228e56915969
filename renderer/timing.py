"""Stage timing and peak memory for a chunk, the one way every renderer measures them.

CUDA work is asynchronous: `StageClock` synchronises at each lap so a stage's kernels count in that stage.
Peak memory is `torch.cuda.max_memory_allocated` on CUDA (reset per chunk by `start_chunk`), else the process's
peak RSS (a lifetime peak: the OS keeps no per-chunk figure).
"""

from __future__ import annotations

import resource
import sys
import time

import torch


class StageClock:
    """Adds wall milliseconds per stage into `timings` (a stage lapped twice accumulates)."""

    def __init__(self, device: torch.device, timings: dict[str, float] | None = None):
        self.cuda = device.type == "cuda"
        self.timings = {} if timings is None else timings
        self.last = self._now()

    def _now(self) -> float:
        if self.cuda:
            torch.cuda.synchronize()
        return time.perf_counter()

    def lap(self, stage: str) -> None:
        now = self._now()
        self.timings[stage] = self.timings.get(stage, 0.0) + (now - self.last) * 1e3
        self.last = now

    def resume(self) -> None:
        """Start timing again from now: the time since the last lap was not this stage's (a streaming render
        waited while its caller handed the frames out)."""
        self.last = self._now()


def process_peak_rss_bytes() -> int:
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss     # KiB on Linux, bytes on macOS
    return int(peak if sys.platform == "darwin" else peak * 1024)


def start_chunk(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)


def peak_memory_bytes(device: torch.device) -> int:
    return int(torch.cuda.max_memory_allocated(device)) if device.type == "cuda" else process_peak_rss_bytes()
