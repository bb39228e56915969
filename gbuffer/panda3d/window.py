"""`--show`: a window that displays the engine's lit frame as it streams (needs a display; X11 through pandagl)."""

from __future__ import annotations

import numpy as np

from gbuffer.panda3d.display import Panda3DUnavailableError, panda3d_core, window_pipe


class LitFrameWindow:
    """An on-screen window showing one RGB image per `show()`; it is drawn with the engine's next frame."""

    def __init__(self, width: int, height: int, title: str = "alaya-studio: panda3d"):
        core = panda3d_core()
        self.engine = core.GraphicsEngine.get_global_ptr()
        props = core.WindowProperties.size(width, height)
        props.set_title(title)
        self.window = self.engine.make_output(window_pipe(), "alaya-show", 0, core.FrameBufferProperties.get_default(),
                                              props, core.GraphicsPipe.BF_require_window)
        if self.window is None:
            raise Panda3DUnavailableError("cannot open a window on this display; run without --show", "--show")
        self.texture = core.Texture("lit-frame")
        self.texture.setup_2d_texture(width, height, core.Texture.T_unsigned_byte, core.Texture.F_rgb8)
        root = core.NodePath("alaya-show")
        card = core.CardMaker("frame")
        card.set_frame(-1, 1, -1, 1)                   # the whole film of a 2x2 orthographic lens
        quad = root.attach_new_node(card.generate())
        quad.set_texture(self.texture)
        quad.set_y(1.0)
        lens = core.OrthographicLens()
        lens.set_film_size(2, 2)
        region = self.window.make_display_region()
        region.set_camera(root.attach_new_node(core.Camera("show", lens)))

    def show(self, rgb: np.ndarray) -> None:
        self.texture.set_ram_image_as(np.ascontiguousarray(rgb[::-1]).tobytes(), "RGB")   # GL rows: bottom first

    def close(self) -> None:
        if self.window is not None:
            self.engine.remove_window(self.window)
            self.window = None
