"""Importing bpy, running it quietly, and its one error type: Blender writes its logs (and, on numpy 2, a complaint
about one of its numpy-built parts that rendering does not use) straight to the process's stdout and stderr, below
Python."""

from __future__ import annotations

import contextlib
import os
import sys

from alaya_errors import UserError


@contextlib.contextmanager
def quiet():
    """Send file descriptors 1 and 2 to /dev/null for the block (Blender's C code writes there directly)."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = [os.dup(1), os.dup(2)]
    null = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(null, 1)
        os.dup2(null, 2)
        yield
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for fd in (*saved, null):
            os.close(fd)


class BlenderError(UserError):
    """A .blend that cannot be recorded as it is (no camera, empty range, a material the AOVs cannot read)."""


def import_bpy():
    """The bpy module; a UserError in one line when the extra is not installed."""
    if "bpy" in sys.modules:
        return sys.modules["bpy"]
    try:
        with quiet():
            import bpy
    except ImportError as exc:
        raise BlenderError(f"bpy (Blender as a Python module) is not available: {exc}; "
                        f"pip install 'alaya-studio[engines]' (CPython 3.11)", "--blender") from None
    return bpy
