"""glibc's malloc, set for a studio whose large buffers are made on one thread and freed on another (issue 29).

A live session's frames are large (a 416x224 G-buffer is 1.4 MB, its RGB and YUV pictures 280 and 140 KB) and
cross threads: the session's worker renders them, aiortc's executor threads encode them, the event loop drops
them. glibc serves each thread from an arena of its own, and by default it raises its mmap threshold to the size
of any mmapped block that is freed (up to 32 MB), so after the first frame every later one comes from those
arenas. With several sessions at once there are many arenas, each holding freed frames between live ones, and a
heap gives memory back only from its top: the server grew by about 30 MB per concurrent session, for good.

Two settings end that (measured one by one in RELIABILITY.md, "Sessions in groups"):
- at most ARENAS arenas for the whole process, instead of glibc's 8 per core: the threads share two heaps, so
  what one session frees is reused by the next session's frames instead of sitting in an arena of its own. Set
  first thing in `serve`, before any thread (Ray's among them) has picked an arena, and again by create_app;
- once a session has ended, a collection of its garbage and `malloc_trim(0)`: the blocks it freed (frames, codec
  state, packets, Python objects) leave holes in the heaps, which glibc returns only from a heap's top; trimming
  hands every free page of every arena back (madvise), so the next group of sessions starts from the same
  footprint.

Not a fixed mmap threshold (this module's first choice, which also held memory flat): with every block of 128 KiB
and more mapped on its own, each such block is a fresh mapping whose pages fault in, zeroed, on first touch and go
back to the system at its free. A renderer that makes megabytes of activations a chunk paid that on every tensor:
a live nano chunk took 1.5-2x as long (90 -> 140-170 ms), the reference renderer's streams ran ~15 % slower.
"""

from __future__ import annotations

import ctypes
import gc
import logging
import platform
import threading
import time

log = logging.getLogger("alaya.allocator")

ARENAS = 2                     # malloc arenas for the process (glibc's default: 8 per core)
_M_ARENA_MAX = -8              # malloc.h
_GLIBC = platform.libc_ver()[0] == "glibc"
_state = threading.Lock()      # guards _requests and the hand-over of _running
_running = threading.Lock()    # held by the one thread doing a pass of return_free_memory
_requests = 0


def limit_arenas(arenas: int = ARENAS) -> bool:
    """Cap glibc's malloc arenas for this process (arenas made before stay; no new one past the cap); False where
    the C library is not glibc (nothing changes). Call it early: each thread's first malloc picks its arena."""
    if not _GLIBC:
        return False
    if not ctypes.CDLL(None).mallopt(_M_ARENA_MAX, arenas):
        log.warning("mallopt(M_ARENA_MAX, %d) was refused; memory freed by sessions may stay with the process",
                    arenas)
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
