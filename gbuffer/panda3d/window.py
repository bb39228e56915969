"""A window that displays one RGB image per `show()`, drawn with the engine's next frame: `--show` (the engine's
lit frame) and `--receive` (the styled frames the studio sends back).

On screen it needs a display (X11 through pandagl). Offscreen (no display: tests, servers) it is an EGL buffer
of the same size drawing the same textured card, and `shown()` reads back what it drew."""

from __future__ import annotations

import numpy as np

from gbuffer.panda3d.display import Panda3DUnavailableError, headless_pipe, panda3d_core, window_pipe


class FrameWindow:
    def __init__(self, width: int, height: int, title: str = "alaya-studio: panda3d", offscreen: bool = False,
                 flag: str = "--show"):
        core = panda3d_core()
        self.width, self.height = width, height
        self.engine = core.GraphicsEngine.get_global_ptr()
        props = core.WindowProperties.size(width, height)
        if offscreen:
            pipe, flags = headless_pipe(), core.GraphicsPipe.BF_refuse_window
        else:
            props.set_title(title)
            pipe, flags = window_pipe(flag), core.GraphicsPipe.BF_require_window
        self.window = self.engine.make_output(pipe, f"alaya-{title}", 0, core.FrameBufferProperties.get_default(),
                                              props, flags)
        if self.window is None:
            raise Panda3DUnavailableError(f"cannot open a window on this display; run without {flag}", flag)
        self.readback = None
        if offscreen:                       # what the buffer drew, copied to RAM after each frame
            self.readback = core.Texture("shown")
            self.window.add_render_texture(self.readback, core.GraphicsOutput.RTM_copy_ram)
        self.texture = core.Texture("frame")
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
        """Display `rgb` (H, W, 3), top row first, from the engine's next frame on."""
        self.texture.set_ram_image_as(np.ascontiguousarray(rgb[::-1]).tobytes(), "RGB")   # GL rows: bottom first

    def shown(self) -> np.ndarray | None:
        """Offscreen: the image the buffer drew last, (H, W, 3) top row first; None on screen or before a frame."""
        if self.readback is None or not self.readback.has_ram_image():
            return None
        image = np.frombuffer(memoryview(self.readback.get_ram_image_as("RGB")), np.uint8)
        return image.reshape(self.height, self.width, 3)[::-1]

    def close(self) -> None:
        if self.window is not None:
            self.engine.remove_window(self.window)
            self.window = None
