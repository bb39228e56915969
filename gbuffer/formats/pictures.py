"""Colour conversions of PyAV video frames, each on one swscale thread. Every conversion in the project goes here.

PyAV 17 converts on every core by default, and PyAV 18.1 keeps one converter per calling thread for that thread's
life. That is unsafe in a forked child:
- a process forked from one thread, with Python code to run before its exec, frees every other thread's
  thread-locals. Ray starts its head processes that way, as does `subprocess` with `preexec_fn`;
- freeing a multi-threaded swscale context waits for its worker threads, and the child has none;
- so the child hangs before its exec, and the parent waits on it forever.

That is how `ray.init`, run from the studio's start-up thread, hung after earlier tests had converted frames on
the main thread (CI, 2026-12-07). A context with one thread owns no worker threads, so it is safe to free anywhere.
The frames here are small (160x96 live), and the sessions' own threads already fill the cores, so a second
swscale thread would buy nothing.
"""

from __future__ import annotations

import av
import numpy as np

SWSCALE_THREADS = 1


def convert(frame: av.VideoFrame, format: str) -> av.VideoFrame:
    """`frame` in pixel format `format` (the same frame when it already is)."""
    return frame.reformat(format=format, threads=SWSCALE_THREADS)


def yuv420p(rgb: np.ndarray) -> av.VideoFrame:
    """An H×W×3 uint8 RGB picture as the yuv420p frame that the encoders take."""
    return convert(av.VideoFrame.from_ndarray(np.ascontiguousarray(rgb), format="rgb24"), "yuv420p")


def rgb24(frame: av.VideoFrame) -> np.ndarray:
    """A decoded frame as an H×W×3 uint8 RGB array."""
    return frame.to_ndarray(format="rgb24", threads=SWSCALE_THREADS)
