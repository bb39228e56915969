"""The figures both switch_bench viewers report (aiortc in bench/switch_bench.py, Chromium in
bench/switch_browser.py), in one module that both import, so neither imports the other."""

from __future__ import annotations

import numpy as np


def figures(latencies, g2g, fps: float, bpm: float | None = None, beat_errors=(), due: str = "beat") -> dict:
    """The figures both viewers report: switch → screen and glass-to-glass in ms, the frame period, and with a
    tempo the beat error in frame periods (p50 signed, late positive; p95 of its size). `due`: what the errors
    are counted from ("timetag": an OSC bundle's time, no tempo)."""
    return {"switch_p50_ms": round(float(np.percentile(latencies, 50)), 1),
            "switch_p95_ms": round(float(np.percentile(latencies, 95)), 1),
            "switch_max_ms": round(float(np.max(latencies)), 1),
            "g2g_p50_ms": round(float(np.percentile(g2g, 50)), 1) if len(g2g) else None,
            "g2g_p95_ms": round(float(np.percentile(g2g, 95)), 1) if len(g2g) else None,
            "frame_ms": round(1e3 / fps, 1),
            **({"bpm": bpm} if bpm is not None else {}),
            **({f"{due}_error_p50_frames": round(float(np.percentile(beat_errors, 50)), 2),
                f"{due}_error_p95_frames": round(float(np.percentile(np.abs(beat_errors), 95)), 2)}
               if len(beat_errors) else {})}
