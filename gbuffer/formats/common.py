"""Small helpers every reader and writer shares: default fps, fps checks, natural file order, atomic writes."""

from __future__ import annotations

import math
import os
import re
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from gbuffer.frame import GBufferError

# Official `.npy` windows and image folders carry no frame rate. The report's closed loop runs at 30 FPS
# (SuperTuxKart), so that is what we assume unless the caller passes `fps`.
DEFAULT_FPS = 30.0


def check_fps(fps: float | None, where: str) -> float | None:
    """None passes through; anything else must be a finite positive number."""
    if fps is None:
        return None
    try:
        value = float(fps)
    except (TypeError, ValueError):
        raise GBufferError(f"fps must be a number, got {fps!r}", where) from None
    if not math.isfinite(value) or value <= 0:
        raise GBufferError(f"fps must be a positive number, got {fps!r}", where)
    return value


def natural_key(text: str) -> list:
    """Sort key that orders 'frame2' before 'frame10' (digit runs compare as numbers)."""
    return [int(part) if part.isdigit() else part.lower() for part in re.split(r"(\d+)", text)]


def check_same_size(size: tuple[int, int], expected: tuple[int, int], what: str, where: str) -> None:
    """Raise if `size` (H, W) differs from the sequence's `expected` (H, W)."""
    if size != expected:
        raise GBufferError(f"{what} is {size[1]}x{size[0]} but the sequence is {expected[1]}x{expected[0]}",
                           where)


@contextmanager
def atomic_path(path: Path) -> Iterator[Path]:
    """Yield `path.tmp` to write into; rename it to `path` only if the block finishes without error,
    so an interrupted write never leaves a file that looks complete."""
    tmp = path.with_name(path.name + ".tmp")
    try:
        yield tmp
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    os.replace(tmp, path)
