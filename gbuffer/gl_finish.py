"""glFinish without holding Python's GIL, for the studio's OpenGL users (the engine's raster, the reference
renderer's GL backend).

moderngl holds the GIL through every call. llvmpipe does a frame's work in whichever call first needs it
(glFinish, or a read of the pixels), so through moderngl the whole frame would stall every other Python thread
of the studio: the event loop, the encoders, the other sessions. The same glFinish called through ctypes lets
the GIL go while it waits; the reads that follow are plain copies.
"""

from __future__ import annotations

import ctypes
from typing import Callable


def gil_free_finish(fallback: Callable[[], None]) -> Callable[[], None]:
    """A glFinish for the context current on the calling thread, GIL released; `fallback` (the context's own
    `finish`) where libEGL cannot be loaded through ctypes."""
    try:
        egl = ctypes.CDLL("libEGL.so.1")
        egl.eglGetProcAddress.restype = ctypes.c_void_p
        egl.eglGetProcAddress.argtypes = [ctypes.c_char_p]
        address = egl.eglGetProcAddress(b"glFinish")
    except (OSError, AttributeError):
        address = None
    return ctypes.CFUNCTYPE(None)(address) if address else fallback
