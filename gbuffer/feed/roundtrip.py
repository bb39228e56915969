"""Round-trip times of the return path (feed protocol 2): G-buffer frame sent → its styled frame received.

The client notes each frame as it sends it and each styled frame as it arrives (on its reader thread, so a slow
consumer does not inflate the figure); styled frames name the G-buffer frame they came from."""

from __future__ import annotations

import collections
import threading
import time

import numpy as np

from gbuffer.feed.protocol import StyledFrame

KEPT_SENDS = 4096        # send times kept for frames not back yet (the studio skips some: latest frame wins)


class RoundTrips:
    def __init__(self) -> None:
        self._sent: collections.OrderedDict[int, float] = collections.OrderedDict()
        self._cond = threading.Condition()
        self.roundtrip_ms: list[float] = []
        self.render_ms: list[float] = []
        self.studio_ms: list[float] = []
        self.received = 0
        self.missed = 0
        self.last_index: int | None = None

    def sent(self, index: int) -> None:
        with self._cond:
            self._sent[index % 2**32] = time.perf_counter()
            self._sent.move_to_end(index % 2**32)
            while len(self._sent) > KEPT_SENDS:
                self._sent.popitem(last=False)

    def arrived(self, frame: StyledFrame) -> None:
        now = time.perf_counter()
        with self._cond:
            self.received += 1
            self.missed += frame.missed
            self.last_index = frame.index
            self.render_ms.append(frame.render_ms)
            self.studio_ms.append(frame.studio_ms)
            sent = self._sent.pop(frame.index, None)
            if sent is not None:
                self.roundtrip_ms.append((now - sent) * 1e3)
            self._cond.notify_all()

    def wait_for(self, index: int, timeout: float) -> bool:
        """Until the styled frame of G-buffer frame `index` (or a later one) arrived; False on timeout."""
        with self._cond:
            return self._cond.wait_for(lambda: self.last_index is not None and self.last_index >= index % 2**32,
                                       timeout)

    def summary(self) -> dict:
        """frames_received, frames_missed and the p50/p95 figures in ms (None before any frame came back);
        studio_p50_ms: the studio's share (frame read → styled frame ready), render included."""
        def pct(values: list[float], q: float) -> float | None:
            return round(float(np.percentile(values, q)), 2) if values else None
        with self._cond:
            trips, render, studio = list(self.roundtrip_ms), list(self.render_ms), list(self.studio_ms)
            return {"frames_received": self.received, "frames_missed": self.missed,
                    "roundtrip_p50_ms": pct(trips, 50), "roundtrip_p95_ms": pct(trips, 95),
                    "render_p50_ms": pct(render, 50), "studio_p50_ms": pct(studio, 50)}
