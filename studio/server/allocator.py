"""glibc's malloc, set for a studio whose large buffers are made on one thread and freed on another (issue 29).

A live session's frames are large (a 416x224 G-buffer is 1.4 MB, its RGB and YUV pictures 280 and 140 KB) and
cross threads: the session's worker renders them, aiortc's executor threads encode them, the event loop drops
them. glibc serves each thread from an arena of its own, and by default it raises its mmap threshold to the size
of any mmapped block that is freed (up to 32 MB), so after the first frame every later one comes from those
arenas. With several sessions at once there are many arenas, each holding freed frames between live ones, and a
heap gives memory back only from its top: the server grew by about 30 MB per concurrent session, for good.

Two settings end that (measured one by one in RELIABILITY.md, "Sessions in groups"):
- a fixed mmap threshold: blocks of MMAP_THRESHOLD and more are always mapped on their own and unmapped when
  freed, so a frame's memory goes back to the system when the frame goes, also while sessions run;
- `malloc_trim(0)` once a session has ended: the smaller blocks it freed (codec state, packets, Python objects)
  leave holes in the arenas' heaps, which glibc returns only from a heap's top; trimming hands every free page
  of every arena back (madvise), so the next group of sessions starts from the same footprint.
"""

from __future__ import annotations

import ctypes
import logging
import platform
import threading

log = logging.getLogger("alaya.allocator")

MMAP_THRESHOLD = 128 * 1024    # bytes: glibc's own starting value, kept fixed instead of rising with frees
_M_MMAP_THRESHOLD = -3         # malloc.h
_GLIBC = platform.libc_ver()[0] == "glibc"
_trimming = threading.Lock()   # one trim at a time: sessions that end together need not walk the arenas 4 times over


def map_large_blocks(threshold: int = MMAP_THRESHOLD) -> bool:
    """Fix glibc's mmap threshold for this process; False where the C library is not glibc (nothing changes)."""
    if not _GLIBC:
        return False
    if not ctypes.CDLL(None).mallopt(_M_MMAP_THRESHOLD, threshold):
        log.warning("mallopt(M_MMAP_THRESHOLD, %d) was refused; memory freed by sessions may stay with the process",
                    threshold)
        return False
    return True


def return_free_memory() -> None:
    """Give the free pages of every malloc arena back to the system. Blocking (10-400 ms measured on a loaded
    2-core machine, holding each arena's lock in turn): call it from a worker thread, never the event loop."""
    if _GLIBC:
        with _trimming:
            ctypes.CDLL(None).malloc_trim(0)
