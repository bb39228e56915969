"""A recording's frames in a preset, drawn by the reference renderer over its own G-buffer (the teacher).

Minimal version written beside training/styles.py; engineer `eval` owns this module (same name and signature).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from gbuffer.frame import GBufferFrame
from prompt_presets.resolve import conditioning_for
from renderer.reference import ReferenceRenderer
from renderer.reference.renderer import MAX_CHUNK


def style_frames(gbuffer: np.ndarray, style: str, timestamps: Sequence[float] | None = None) -> np.ndarray:
    """uint8 (N, 5, H, W, 3) G-buffer frames → uint8 (N, H, W, 3) RGB in preset `style` (timestamps drive the
    animated effects: caustics, haze)."""
    n, _, height, width, _ = gbuffer.shape
    times = list(timestamps) if timestamps is not None else [0.0] * n
    cond = conditioning_for(style)
    session = ReferenceRenderer().open_session(width, height)
    out = np.empty((n, height, width, 3), np.uint8)
    try:
        for start in range(0, n, MAX_CHUNK):
            end = min(start + MAX_CHUNK, n)
            frames = [GBufferFrame(i, times[i], gbuffer[i]) for i in range(start, end)]
            out[start:end] = session.render(frames, [cond] * len(frames)).rgb
    finally:
        session.close()
    return out
