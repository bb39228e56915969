"""How physical G-buffer quantities are stored in the 8-bit channels. The one place that knows the rules.

- albedo: sRGB colour.
- depth: grey (R = G = B), *near is bright*: v = 255 · (1 − log(d / NEAR) / log(FAR / NEAR)), clipped,
  with d the view-space distance along the camera axis in metres; sky (no geometry) is 0.
  Log spacing keeps precision close to the camera where a kart game needs it.
- metallic, roughness: grey scalars 0..1 → 0..255.
- normal: view space (x right, y up, z towards the camera), v = (n + 1) / 2 · 255 per component.
"""

from __future__ import annotations

import numpy as np

DEPTH_NEAR_M = 0.5
DEPTH_FAR_M = 500.0
_LOG_RANGE = float(np.log(DEPTH_FAR_M / DEPTH_NEAR_M))


def encode_depth(distance_m: np.ndarray) -> np.ndarray:
    """float distance in metres (inf/NaN = sky) → uint8 (..., 3) grey."""
    d = np.asarray(distance_m, dtype=np.float32)
    sky = ~np.isfinite(d)
    d = np.where(sky, DEPTH_FAR_M, np.maximum(d, DEPTH_NEAR_M))
    v = 1.0 - np.log(d / DEPTH_NEAR_M) / _LOG_RANGE
    v = np.where(sky, 0.0, np.clip(v, 0.0, 1.0))
    g = np.round(v * 255.0).astype(np.uint8)
    return np.repeat(g[..., None], 3, axis=-1)


def decode_depth(depth_u8: np.ndarray) -> np.ndarray:
    """uint8 (..., 3) or (...) grey → distance in metres (float32); 0 (sky/far) decodes to DEPTH_FAR_M."""
    g = np.asarray(depth_u8)
    if g.ndim >= 1 and g.shape[-1] == 3:
        g = g[..., 0]
    v = g.astype(np.float32) / 255.0
    return (DEPTH_NEAR_M * np.exp((1.0 - v) * _LOG_RANGE)).astype(np.float32)


def encode_unit(x: np.ndarray) -> np.ndarray:
    """Scalar 0..1 (metallic, roughness) → uint8 (..., 3) grey."""
    g = np.round(np.clip(np.asarray(x, np.float32), 0.0, 1.0) * 255.0).astype(np.uint8)
    return np.repeat(g[..., None], 3, axis=-1)


def encode_normal(n: np.ndarray) -> np.ndarray:
    """View-space unit normals (..., 3) float → uint8 (..., 3)."""
    return np.round((np.clip(np.asarray(n, np.float32), -1.0, 1.0) + 1.0) * 127.5).astype(np.uint8)


def decode_normal(n_u8: np.ndarray) -> np.ndarray:
    """uint8 (..., 3) → float32 view-space normals, renormalised."""
    n = np.asarray(n_u8, np.float32) / 127.5 - 1.0
    return n / np.maximum(np.linalg.norm(n, axis=-1, keepdims=True), 1e-6)
