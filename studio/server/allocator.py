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
- once a session has ended, a collection of its garbage and `malloc_trim(0)`: the smaller blocks it freed (codec
  state, packets, Python objects) leave holes in the arenas' heaps, which glibc returns only from a heap's top;
  trimming hands every free page of every arena back (madvise), so the next group of sessions starts from the
  same footprint.
"""

from __future__ import annotations

import ctypes
import gc
import logging
import platform
import threading
import time

log = logging.getLogger("alaya.allocator")

MMAP_THRESHOLD = 128 * 1024    # bytes: glibc's own starting value, kept fixed instead of rising with frees
_M_MMAP_THRESHOLD = -3         # malloc.h
_GLIBC = platform.libc_ver()[0] == "glibc"
_state = threading.Lock()      # guards _requests and the hand-over of _running
_running = threading.Lock()    # held by the one thread doing a pass of return_free_memory
_requests = 0


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
    """Collect the ended sessions' garbage, then give the free pages of every malloc arena back to the system.

    A closed session and its peer connection are reference cycles (about 12,000 objects for 4 sessions); left to
    the collector's own schedule they wait for a full collection, which in a heap of torch and Gradio comes every
    several rounds of sessions, and meanwhile fragment the arenas. Blocking (the collection holds the GIL; the
    trim each arena's lock in turn): call it from a worker thread. Sessions that end together share one pass: a
    call while a pass runs only asks it to go once more."""
    global _requests
    with _state:
        _requests += 1
        if not _running.acquire(blocking=False):
            return                  # the pass running now goes again for this request
    while True:
        with _state:
            if not _requests:
                _running.release()
                return
            _requests = 0
        started = time.perf_counter()
        gc.collect()
        if _GLIBC:
            ctypes.CDLL(None).malloc_trim(0)
        log.debug("free memory returned in %.0f ms", (time.perf_counter() - started) * 1e3)
