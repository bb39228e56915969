"""Synthetic paired recordings on disk for eval's tests: the ray-cast scene (renderer/reference/synthetic.py) as
npy windows with an RGB stream."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from gbuffer.formats import write_npy_windows
from renderer.reference.synthetic import synthetic_gbuffer

W, H = 64, 32


def world(path: Path, frames: int, t0: float, beauty=None, dt: float = 1 / 15) -> Path:
    """Frame i at time t0 + i dt; its 'beauty pass' `beauty(frame)`, by default a fixed colour mix of the channels
    (any paired RGB will do for most tests)."""
    out = []
    for i in range(frames):
        f = synthetic_gbuffer(W, H, t0 + i * dt, i)
        mix = 0.6 * f.channel("albedo") + 0.25 * f.channel("normal") + 0.15 * f.channel("depth")
        f.rgb = beauty(f) if beauty else np.clip(mix, 0, 255).astype(np.uint8)
        out.append(f)
    write_npy_windows(out, path, window=8)
    return path
