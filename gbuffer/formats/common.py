"""Small helpers every reader and writer shares: default fps, fps checks, natural file order, atomic writes."""

from __future__ import annotations

import math
import os
import re
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator

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


class AtomicFile:
    """A file written under a temporary name beside its final one and renamed into place by `commit()`, so
    an interrupted write never leaves a file that looks complete (and a reader never sees half of one).
    `discard()` removes the temporary file. For writers that stay open across calls (MP4, .gbuf.zip)."""

    def __init__(self, path: Path, suffix: str = ".tmp", hidden: bool = False):
        """The temporary file is `NAME<suffix>`, or `.NAME<suffix>` when `hidden` (kept out of listings that
        offer the folder's files to users)."""
        self.path = Path(path)
        self.tmp = self.path.with_name(("." if hidden else "") + self.path.name + suffix)

    def commit(self) -> Path:
        os.replace(self.tmp, self.path)
        return self.path

    def discard(self) -> None:
        self.tmp.unlink(missing_ok=True)


class CommitOnExit:
    """For writers with close() (finish and move into place) and abort() (drop the partial file): a `with`
    block that ends normally closes, one that raises aborts."""

    close: Callable[[], object]           # the writer's own
    abort: Callable[[], object]

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()


@contextmanager
def atomic_path(path: Path) -> Iterator[Path]:
    """Yield a temporary path to write into; it becomes `path` only if the block finishes without error."""
    target = AtomicFile(path)
    try:
        yield target.tmp
    except BaseException:
        target.discard()
        raise
    target.commit()


def write_atomic(path: Path, data: bytes) -> None:
    """Write `data` to `path` in one step as far as readers can tell."""
    with atomic_path(Path(path)) as tmp:
        tmp.write_bytes(data)
