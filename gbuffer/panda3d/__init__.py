"""Panda3D as a live G-buffer source: its bundled `models/environment` with a car moved by Bullet physics.

Needs the optional `engines` extra (panda3d); nothing outside `alaya-studio engine panda3d` imports this package.

    with Panda3DSource(width=416, height=224, fps=30) as game:   # offscreen, no display needed
        frame = next(iter(game))                                   # GBufferFrame with .rgb, the lit frame
"""

from gbuffer.panda3d.source import Panda3DSource

__all__ = ["Panda3DSource"]
