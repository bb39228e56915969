"""glibc's malloc, set for a studio whose large buffers are made on one thread and freed on another (issue 29).

A live session's frames are large (a 416x224 G-buffer is 1.4 MB, its RGB and YUV pictures 280 and 140 KB) and
cross threads: the session's worker renders them, aiortc's executor threads encode them, the event loop drops
them. glibc serves each thread from an arena of its own, and by default it raises its mmap threshold to the size
of any mmapped block that is freed (up to 32 MB), so after the first frame every later one comes from those
arenas. With several sessions at once there are many arenas, each holding freed frames between live ones, and a
heap gives memory back only from its top: the server grew by about 30 MB per concurrent session, for good.

A fixed threshold ends that: blocks of MMAP_THRESHOLD and more are always mapped on their own and unmapped when
freed, so a frame's memory goes back to the system when the frame goes (measured in RELIABILITY.md, "Sessions in
groups", with the price in CPU). Setting it also fixes the trim threshold, which glibc would otherwise raise with it.
"""

from __future__ import annotations

import ctypes
import logging
import platform

log = logging.getLogger("alaya.allocator")

MMAP_THRESHOLD = 128 * 1024    # bytes: glibc's own starting value, kept fixed instead of rising with frees
_M_MMAP_THRESHOLD = -3         # malloc.h


def map_large_blocks(threshold: int = MMAP_THRESHOLD) -> bool:
    """Fix glibc's mmap threshold for this process; False where the C library is not glibc (nothing changes)."""
    if platform.libc_ver()[0] != "glibc":
        return False
    if not ctypes.CDLL(None).mallopt(_M_MMAP_THRESHOLD, threshold):
        log.warning("mallopt(M_MMAP_THRESHOLD, %d) was refused; memory freed by sessions may stay with the process",
                    threshold)
        return False
    return True
