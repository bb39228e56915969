"""Panda3D's display set-up: headless EGL (p3headlessgl) offscreen, with no X display, on llvmpipe or a GPU.

Config must be given before the first graphics pipe is made, so every user of panda3d in this package imports
it from here."""

from __future__ import annotations

import atexit

from alaya_errors import UserError

# p3headlessgl opens EGL on a device, not a window system; the audio library is not needed for rendering. The
# display modules print their own failures; ours say them in one line (and EGL's teardown chatter goes).
_CONFIG = """
load-display p3headlessgl
window-type none
audio-library-name null
notify-level warning
notify-level-display error
notify-level-x11display fatal
notify-level-egldisplay fatal
sync-video false
"""


class Panda3DUnavailableError(UserError):
    """panda3d is not installed, or cannot open an OpenGL context here (one line, a set-up problem)."""


_configured = False      # panda3d_core() loaded our config into Panda in this process


def panda3d_core():
    """The configured `panda3d.core` module; Panda3DUnavailableError when the extra is not installed."""
    try:
        import panda3d.core as core
    except ImportError:
        raise Panda3DUnavailableError("panda3d is not installed; pip install 'alaya-studio[engines]'",
                                      "engine panda3d") from None
    global _configured
    if not _configured:
        core.load_prc_file_data("alaya-studio", _CONFIG)
        # Panda's GL contexts must go before the interpreter tears EGL down, or the process dies at exit (SIGSEGV)
        atexit.register(core.GraphicsEngine.get_global_ptr().remove_all_windows)
        _configured = True
    return core


def headless_pipe():
    """The EGL graphics pipe (no display needed)."""
    core = panda3d_core()
    selection = core.GraphicsPipeSelection.get_global_ptr()
    pipe = selection.make_module_pipe("p3headlessgl")
    if pipe is None or not pipe.is_valid():
        raise Panda3DUnavailableError("cannot open a headless OpenGL context (EGL) for Panda3D; install Mesa "
                                      "(libegl1 libgl1-mesa-dri) or an NVIDIA driver", "engine panda3d")
    return pipe


def window_pipe(flag: str = "--show"):
    """The windowed pipe (X11) for `flag`'s window; one line when there is no display."""
    core = panda3d_core()
    pipe = core.GraphicsPipeSelection.get_global_ptr().make_module_pipe("pandagl")
    if pipe is None or not pipe.is_valid():
        raise Panda3DUnavailableError(f"cannot open a window: no display (is DISPLAY set?); run without {flag}",
                                      flag)
    return pipe
