"""Frame-index stamp: a bar code drawn into the picture so a receiver can read back which frame it got.

Used to measure time to first frame and glass-to-glass latency, and by the tests to check order and drops.
Layout, top-left corner: two rows of `BITS` square cells of side `cell_size(width)` pixels; row 0 holds the
index bits (most significant first, white = 1), row 1 the same bits inverted. Large flat cells survive H.264
and VP8 at ordinary bitrates; the inverted row lets the reader reject a picture that carries no stamp.
"""

from __future__ import annotations

import numpy as np

BITS = 16  # indices are stamped modulo 2**16


def cell_size(width: int) -> int:
    """Cell side in pixels for a picture `width` wide; the reader derives it the same way."""
    return int(max(4, min(16, width // (BITS + 4))))


def stamp_fits(width: int, height: int) -> bool:
    """Whether a picture of this size has room for the stamp."""
    c = cell_size(width)
    return width >= BITS * c and height >= 2 * c


def stamp_index(rgb: np.ndarray, index: int) -> np.ndarray:
    """Draw `index` into a copy of `rgb` (H, W, 3) uint8 and return it."""
    out = np.array(rgb, dtype=np.uint8, copy=True)
    c = cell_size(out.shape[1])
    if out.shape[0] < 2 * c or out.shape[1] < BITS * c:
        raise ValueError(f"picture {out.shape[1]}x{out.shape[0]} is too small for a frame stamp")
    value = index % (1 << BITS)
    for b in range(BITS):
        bit = (value >> (BITS - 1 - b)) & 1
        out[0:c, b * c:(b + 1) * c] = 255 if bit else 0
        out[c:2 * c, b * c:(b + 1) * c] = 0 if bit else 255
    return out


def read_stamp(rgb: np.ndarray) -> int | None:
    """The stamped index (modulo 2**16) of a decoded picture (H, W, 3) uint8, or None if it has no stamp."""
    c = cell_size(rgb.shape[1])
    if rgb.shape[0] < 2 * c or rgb.shape[1] < BITS * c:
        return None
    # Sample the centre half of each cell: block edges are where codecs blur.
    lo, hi = c // 4, c - c // 4
    luma = rgb[:2 * c, :BITS * c].astype(np.float32).mean(axis=2)
    value = 0
    for b in range(BITS):
        top = luma[lo:hi, b * c + lo:b * c + hi].mean()
        bottom = luma[c + lo:c + hi, b * c + lo:b * c + hi].mean()
        if abs(top - bottom) < 64:
            return None
        value = (value << 1) | int(top > bottom)
    return value
