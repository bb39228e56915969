"""The offscreen buffer that draws a Panda3D scene into the five channels and the lit frame in one pass.

One framebuffer object with four RGBA8 targets (see shaders.py), each copied to RAM after the frame is drawn
(RTM_copy_ram); `read()` turns them into the (5, H, W, 3) frame and the (H, W, 3) lit image. The FBO lives on
a 1x1 EGL pbuffer that only hosts the GL context: pbuffers have no auxiliary bitplanes, FBOs do.
"""

from __future__ import annotations

import math

import numpy as np

from gbuffer.encoding import encode_normal
from gbuffer.frame import CHANNEL_INDEX, NUM_CHANNELS
from gbuffer.panda3d import shaders
from gbuffer.panda3d.display import Panda3DUnavailableError, headless_pipe, panda3d_core

SKY_SRGB = (0.55, 0.72, 0.92)
FOV_Y_DEG = 55.0
SUN_WORLD = (0.4, -0.3, 0.85)   # towards the sun, Panda world axes (z up)
SHADOW_MAP_SIZE = 1024
SHADOW_HALF_EXTENT_M = 45.0     # the sun's shadow box covers 90 m x 90 m...
SHADOW_AHEAD_M = 30.0           # ...centred this far ahead of the camera (as the built-in engine's)
SHADOW_DISTANCE_M = 200.0
# Pixels with no geometry, per target: sky colour; sky colour; facing the camera; depth 0 (sky), not metallic,
# fully rough. The same values as the built-in engine's sky.
_FACING_CAMERA = tuple(float(v) / 255.0 for v in encode_normal(np.array([0.0, 0.0, 1.0])))
_CLEAR = (SKY_SRGB, SKY_SRGB, _FACING_CAMERA, (0.0, 0.0, 1.0))


class GBufferPass:
    """Owns the GL buffer and camera for one scene graph `root` at width x height."""

    def __init__(self, root, width: int, height: int):
        core = panda3d_core()
        self.width, self.height = int(width), int(height)
        self.engine = core.GraphicsEngine.get_global_ptr()
        pipe = headless_pipe()
        flags = core.GraphicsPipe.BF_refuse_window
        self._host = self.engine.make_output(pipe, "alaya-host", -10, core.FrameBufferProperties.get_default(),
                                             core.WindowProperties.size(1, 1), flags, None, None)
        if self._host is None:
            raise Panda3DUnavailableError("EGL gave Panda3D no offscreen buffer", "engine panda3d")
        fb = core.FrameBufferProperties()
        fb.set_rgba_bits(8, 8, 8, 8)
        fb.set_depth_bits(24)
        fb.set_aux_rgba(len(_CLEAR) - 1)
        self.buffer = self.engine.make_output(pipe, "alaya-gbuffer", -5, fb,
                                              core.WindowProperties.size(self.width, self.height),
                                              flags | core.GraphicsPipe.BF_refuse_parasite,
                                              self._host.get_gsg(), self._host)
        if self.buffer is None:
            self.engine.remove_window(self._host)
            raise Panda3DUnavailableError("this OpenGL driver cannot draw to 4 targets at once (FBO with 3 "
                                          "auxiliary bitplanes)", "engine panda3d")
        planes = [core.GraphicsOutput.RTP_color] + [core.GraphicsOutput.RTP_aux_rgba_0 + i
                                                    for i in range(len(_CLEAR) - 1)]
        self.targets = []
        for plane, clear in zip(planes, _CLEAR):
            texture = core.Texture(f"target-{int(plane)}")
            self.buffer.add_render_texture(texture, core.GraphicsOutput.RTM_copy_ram, plane)
            self.buffer.set_clear_value(plane, core.LColor(*clear, 1.0))
            self.buffer.set_clear_active(plane, True)
            self.targets.append(texture)
        lens = core.PerspectiveLens()
        lens.set_near_far(0.1, 1000.0)   # the encoding clips at its own near/far; this only culls
        half_v = math.radians(FOV_Y_DEG) / 2
        lens.set_fov(2 * math.degrees(math.atan(math.tan(half_v) * self.width / self.height)), FOV_Y_DEG)
        self.camera = root.attach_new_node(core.Camera("alaya-camera", lens))
        region = self.buffer.make_display_region()
        region.set_camera(self.camera)
        root.set_shader(core.Shader.make(core.Shader.SL_GLSL, shaders.VERTEX, shaders.fragment_source()), 10)
        root.set_shader_input("sky_colour", core.LVecBase3f(*SKY_SRGB))
        root.set_shader_input("sun_world", core.LVector3f(*SUN_WORLD).normalized())
        self._sun = self._shadow_caster(core, root)

    def _shadow_caster(self, core, root):
        """The sun as a shadow-casting directional light: Panda draws its depth map before each frame and hands
        the shader `p3d_LightSource[0]` (map and view → map matrix); `draw()` keeps its box in front of the view."""
        light = core.DirectionalLight("alaya-sun")
        light.set_shadow_caster(True, SHADOW_MAP_SIZE, SHADOW_MAP_SIZE)
        light.get_lens().set_film_size(2 * SHADOW_HALF_EXTENT_M, 2 * SHADOW_HALF_EXTENT_M)
        light.get_lens().set_near_far(1.0, 2 * SHADOW_DISTANCE_M)
        sun = root.attach_new_node(light)
        root.set_light(sun)
        return sun

    def draw(self) -> None:
        """Render one frame of the scene as it stands."""
        self._aim_sun()
        self.engine.render_frame()

    def _aim_sun(self) -> None:
        """Centre the shadow box ahead of the camera, snapped to shadow-map texels so shadows do not shimmer."""
        core = panda3d_core()
        parent = self._sun.get_parent()
        forward = parent.get_relative_vector(self.camera, core.Vec3(0, 1, 0))
        flat = np.array([forward.x, forward.y, 0.0])
        flat /= np.linalg.norm(flat) or 1.0
        eye = self.camera.get_pos(parent)
        texel = 2 * SHADOW_HALF_EXTENT_M / SHADOW_MAP_SIZE
        centre = np.round((np.array([eye.x, eye.y, eye.z]) + flat * SHADOW_AHEAD_M) / texel) * texel
        towards_sun = np.array(SUN_WORLD) / np.linalg.norm(SUN_WORLD)
        self._sun.set_pos(*(centre + towards_sun * SHADOW_DISTANCE_M))
        self._sun.look_at(core.Point3(*centre))

    def _target(self, i: int) -> np.ndarray:
        """A view (no copy) of target `i` as (H, W, 3) RGB, top row first."""
        texture = self.targets[i]
        if texture.get_num_components() == 4 and texture.get_component_type() == texture.T_unsigned_byte:
            # Panda keeps RAM images as BGRA; viewing them reversed costs nothing (get_ram_image_as("RGB")
            # converts in C++ and took 31 ms for the four targets at 832x448)
            image = np.frombuffer(memoryview(texture.get_ram_image()), np.uint8)
            return image.reshape(self.height, self.width, 4)[::-1, :, 2::-1]   # GL rows start at the bottom
        image = np.frombuffer(memoryview(texture.get_ram_image_as("RGB")), np.uint8)
        return image.reshape(self.height, self.width, 3)[::-1]

    def read(self) -> tuple[np.ndarray, np.ndarray]:
        """(G-buffer uint8 (5, H, W, 3) in CHANNELS order, lit frame uint8 (H, W, 3)) of the last draw."""
        lit, albedo, normal, scalars = (self._target(i) for i in range(len(self.targets)))
        data = np.empty((NUM_CHANNELS, self.height, self.width, 3), np.uint8)
        data[CHANNEL_INDEX["albedo"]] = albedo
        data[CHANNEL_INDEX["normal"]] = normal
        for k, name in enumerate(("depth", "metallic", "roughness")):
            data[CHANNEL_INDEX[name]] = scalars[..., k:k + 1]        # grey: R = G = B
        return data, np.ascontiguousarray(lit)

    def sun_mask(self) -> np.ndarray:
        """uint8 (H, W) sun visibility of the last draw (frame.sun): the alpha of the scalars target."""
        texture = self.targets[3]
        if texture.get_num_components() == 4 and texture.get_component_type() == texture.T_unsigned_byte:
            image = np.frombuffer(memoryview(texture.get_ram_image()), np.uint8)
        else:
            image = np.frombuffer(memoryview(texture.get_ram_image_as("RGBA")), np.uint8)
        return np.ascontiguousarray(image.reshape(self.height, self.width, 4)[::-1, :, 3])

    def close(self) -> None:
        if self.buffer is not None:
            self.engine.remove_window(self.buffer)
            self.engine.remove_window(self._host)
            self.buffer = None
            self.camera.remove_node()
