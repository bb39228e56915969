"""Rasterises the world into the five G-buffer channels in one pass (moderngl, headless EGL).

With `beauty=True` the same pass also writes the engine's own lit image to a sixth target (see beauty.py),
after a depth-only shadow-map pass from the sun. Works on Mesa llvmpipe (CPU) and NVIDIA EGL alike. The five colour
targets (RGB8) are written together by one fragment shader (multiple render targets); a full-screen triangle at the far
plane then fills what is left with the sky's values. Each target is read straight into its slot of the (5, H, W, 3)
frame; the projection flips y so rows come out top first with no copy.

Every live session of the built-in engine has a raster, so contexts come and go with visitors. Opening and
releasing a headless context leaks (measured: about 40 KB of Python objects in moderngl/glcontext and 0.3 MB of
native memory each time, issue 29), so a closed raster releases the GL objects it made and hands its context
back to `CONTEXTS`, where the next raster takes it; at most CONTEXTS_KEPT wait there.
"""

from __future__ import annotations

import math
import os
import threading

import moderngl
import numpy as np

from alaya_errors import UserError
from gbuffer.encoding import DEPTH_FAR_M, DEPTH_NEAR_M, encode_normal
from gbuffer.engine import beauty as lighting
from gbuffer.engine import shaders
from gbuffer.engine.camera import perspective
from gbuffer.engine.meshes import FLOATS_PER_VERTEX, Sector, build_kart_mesh, world_mesh
from gbuffer.engine.world import World
from gbuffer.frame import NUM_CHANNELS, GBufferError
from gbuffer.gl_finish import gil_free_finish

FOV_Y_DEG = 55.0
SKY_ALBEDO = (0.55, 0.72, 0.92)
# What a pixel with no geometry holds, per channel: sky colour, depth 0, not metallic, facing the camera,
# fully rough. Written by a full-screen pass behind everything (cheaper on llvmpipe than five clears).
_FACING_CAMERA = tuple(encode_normal(np.array([0.0, 0.0, 1.0])) / 255.0)
SKY_VALUES = (SKY_ALBEDO, (0.0, 0.0, 0.0), (0.0, 0.0, 0.0), _FACING_CAMERA, (1.0, 1.0, 1.0))


class GLUnavailableError(UserError):
    """The machine cannot give us an OpenGL context (a set-up problem, reported in one line)."""


CONTEXTS_KEPT = 8   # idle contexts kept for the next rasters: more than a studio's usual concurrent sessions


class ContextPool:
    """Headless GL contexts of this process, reused: `take()` one (a kept one, else a new one), `give_back()`
    it with everything made in it released."""

    def __init__(self, keep: int = CONTEXTS_KEPT):
        self.keep = keep
        self.opened = 0                    # contexts this process has created (the rest were reused)
        self._idle: list[moderngl.Context] = []
        self._pid = os.getpid()
        self._lock = threading.Lock()

    def take(self) -> moderngl.Context:
        with self._lock:
            if self._pid != os.getpid():   # a forked child opens its own
                self._idle, self._pid = [], os.getpid()
            if self._idle:
                return self._idle.pop()
        try:
            # moderngl's stub types **settings as Dict[str, Any] (each keyword a dict): its own stub bug
            ctx = moderngl.create_context(standalone=True, backend="egl")  # type: ignore[arg-type]
        except Exception as exc:  # no libEGL / no driver: say what to install instead of a traceback
            reason = " ".join(str(exc).split())  # one line
            raise GLUnavailableError(f"cannot open a headless OpenGL context (EGL): {reason}; install Mesa "
                                     f"(libegl1 libgl1-mesa-dri) or an NVIDIA driver", "engine") from None
        with self._lock:
            self.opened += 1
        return ctx

    def give_back(self, ctx: moderngl.Context) -> None:
        with self._lock:
            if len(self._idle) < self.keep and self._pid == os.getpid():
                self._idle.append(ctx)
                return
        ctx.release()

    @property
    def idle(self) -> int:
        return len(self._idle)


CONTEXTS = ContextPool()

# Vertex layout of meshes.py: position, normal, albedo, uv, (metallic, roughness, pattern).
_ATTRIBUTES = ("3f 3f 3f 2f 3f", "in_pos", "in_normal", "in_color", "in_uv", "in_mat")


def kart_model_matrix(x: float, y: float, z: float, heading: float, pitch: float, roll: float) -> np.ndarray:
    """Kart frame (+x forward, +y up, +z right) → world, as a 4x4 float32 (column vectors)."""
    c, s = math.cos(heading), math.sin(heading)
    yaw = np.array([[c, 0, -s], [0, 1, 0], [s, 0, c]])
    cp, sp = math.cos(pitch), math.sin(pitch)
    tilt_pitch = np.array([[cp, -sp, 0], [sp, cp, 0], [0, 0, 1]])   # nose up for a positive slope
    cr, sr = math.cos(roll), math.sin(roll)
    tilt_roll = np.array([[1, 0, 0], [0, cr, sr], [0, -sr, cr]])   # right side (+z) up for a positive roll
    m = np.eye(4)
    m[:3, :3] = yaw @ tilt_pitch @ tilt_roll
    m[:3, 3] = (x, y, z)
    return m.astype(np.float32)


class GBufferRaster:
    """Owns a GL context for one static scene at one resolution. `render(view, kart_model)` → uint8 (5, H, W, 3).

    `scene` is a World (its mesh is built here) or an interleaved mesh array from `meshes` (tests use a plane).
    `beauty`: also draw the lit RGB image (`render_pair`).
    """

    def __init__(self, scene: World | np.ndarray, width: int, height: int, beauty: bool = False):
        self.width, self.height = int(width), int(height)
        self.beauty = bool(beauty)
        self.ctx: moderngl.Context | None = CONTEXTS.take()     # None once closed
        self._objects: list = []   # every GL object made here, released (newest first) when the raster closes
        try:
            with self._ctx:
                self._build(scene)
        except BaseException:
            self.close()
            raise

    def _own(self, gl_object):
        self._objects.append(gl_object)
        return gl_object

    def _build(self, scene: World | np.ndarray) -> None:
        ctx = self._ctx
        self._finish = gil_free_finish(ctx.finish)
        self.program = self._own(ctx.program(vertex_shader=shaders.VERTEX,
                                               fragment_shader=shaders.fragment_source(self.beauty)))
        if isinstance(scene, World):
            vertices, self._sectors = world_mesh(scene)
        else:
            vertices = np.asarray(scene, np.float32)
            self._sectors = [Sector(0, len(vertices), (0.0, 0.0, 0.0), math.inf)]
        self._sector_centres = np.array([sc.centre for sc in self._sectors], np.float64)   # (S, 3) metres
        self._sector_radii = np.array([sc.radius for sc in self._sectors], np.float64)    # (S,)
        self._world_vbo = self._own(ctx.buffer(vertices.tobytes()))
        self._kart_vbo = self._own(ctx.buffer(build_kart_mesh().tobytes()))
        self._world_vao = self._own(ctx.vertex_array(self.program, [(self._world_vbo, *_ATTRIBUTES)]))
        self._kart_vao = self._own(ctx.vertex_array(self.program, [(self._kart_vbo, *_ATTRIBUTES)]))
        self.triangles = (len(vertices) + self._kart_vbo.size // (4 * FLOATS_PER_VERTEX)) // 3
        size = (self.width, self.height)
        self._targets = [self._own(ctx.texture(size, 3)) for _ in range(NUM_CHANNELS + self.beauty)]
        if self.beauty:
            self._targets.append(self._own(ctx.texture(size, 1)))     # sun visibility, grey 8-bit
        self._depth = self._own(ctx.depth_renderbuffer(size))
        self.fbo = self._own(ctx.framebuffer(color_attachments=self._targets, depth_attachment=self._depth))
        self._sky_program = self._own(ctx.program(vertex_shader=shaders.SKY_VERTEX,
                                                  fragment_shader=shaders.sky_fragment_source(self.beauty)))
        for i, value in enumerate(SKY_VALUES):
            self._sky_program[f"sky_{i}"].value = tuple(float(v) for v in value)
        self._sky_vao = self._own(ctx.vertex_array(self._sky_program, []))
        self.proj = perspective(FOV_Y_DEG, self.width / self.height, DEPTH_NEAR_M, DEPTH_FAR_M)
        self.projection = self.proj.astype(np.float64)    # as recorded (gbuffer/viewpoint.py): NDC y up
        self.proj[1, :] *= -1.0  # flip y: the first row read back is the top of the image
        self.program["proj"].write(self.proj.T.tobytes())
        if self.beauty:
            self._init_beauty(vertices)

    def _init_beauty(self, world_mesh: np.ndarray) -> None:
        """Shadow-map target and depth-only program; the lighting constants as uniforms."""
        ctx = self._ctx
        self._shadow_map = self._own(ctx.depth_texture((lighting.SHADOW_MAP_SIZE,) * 2))
        self._shadow_map.compare_func = "<="
        self._shadow_map.filter = (moderngl.LINEAR, moderngl.LINEAR)
        self._shadow_fbo = self._own(ctx.framebuffer(depth_attachment=self._shadow_map))
        self._shadow_program = self._own(ctx.program(vertex_shader=lighting.SHADOW_VERTEX,
                                                     fragment_shader=lighting.SHADOW_FRAGMENT))
        position_only = (f"3f {FLOATS_PER_VERTEX - 3}x4", "in_pos")
        self._shadow_world = self._own(ctx.vertex_array(self._shadow_program, [(self._world_vbo, *position_only)]))
        self._shadow_kart = self._own(ctx.vertex_array(self._shadow_program, [(self._kart_vbo, *position_only)]))
        for program in (self.program, self._sky_program):
            for name, value in lighting.sky_uniforms().items():
                program[name].value = value
        self.program["fog_density"].value = lighting.FOG_DENSITY
        self.program["shadow_map"].value = 0
        self._sky_program["viewport"].value = (float(self.width), float(self.height))

    def render(self, view: np.ndarray, kart_model: np.ndarray | None = None,
               out: np.ndarray | None = None) -> np.ndarray:
        """Draw the scene (and the kart, if its model matrix is given); read the five targets into `out`
        (or a new array). `view` is the 4x4 world → camera matrix."""
        with self._ctx:  # current on this thread (a server may render from a worker thread)
            return self._render(view, kart_model, out)

    def render_pair(self, view: np.ndarray, kart_model: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(G-buffer uint8 (5, H, W, 3), beauty uint8 (H, W, 3)) of one frame; needs `beauty=True`."""
        gbuffer, rgb, _ = self.render_lit(view, kart_model)
        return gbuffer, rgb

    def render_lit(self, view: np.ndarray,
                   kart_model: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(G-buffer uint8 (5, H, W, 3), beauty uint8 (H, W, 3), sun visibility uint8 (H, W)) of one frame."""
        if not self.beauty:
            raise GBufferError("this raster was built without the beauty pass (beauty=True)", "engine")
        with self._ctx:
            self._shadow_pass(view, kart_model)
            gbuffer = self._render(view, kart_model, None)
            rgb = np.empty((self.height, self.width, 3), np.uint8)
            self.fbo.read_into(rgb, attachment=NUM_CHANNELS, components=3, alignment=1)
            sun = np.empty((self.height, self.width), np.uint8)
            self.fbo.read_into(sun, attachment=NUM_CHANNELS + 1, components=1, alignment=1)
        return gbuffer, rgb, sun

    def _shadow_pass(self, view: np.ndarray, kart_model: np.ndarray | None) -> None:
        """Depth from the sun into the shadow map; sets the object shader's lighting uniforms for this view."""
        ctx = self._ctx
        light_vp, centre = lighting.light_view_projection(view)
        self._shadow_fbo.use()
        self._shadow_fbo.clear(depth=1.0)
        ctx.enable(moderngl.DEPTH_TEST)
        ctx.disable(moderngl.CULL_FACE)   # thin meshes (leaves, walls) cast from both sides
        ctx.depth_func = "<"
        self._shadow_program["light_vp"].write(np.ascontiguousarray(light_vp.T).tobytes())
        if kart_model is not None:
            self._shadow_program["model"].write(np.ascontiguousarray(kart_model.T, np.float32).tobytes())
            self._shadow_kart.render(moderngl.TRIANGLES)
        self._shadow_program["model"].write(np.eye(4, dtype=np.float32).tobytes())
        near = np.linalg.norm(self._sector_centres - centre, axis=1) <= self._sector_radii + lighting.shadow_radius()
        for i in np.flatnonzero(near | np.isinf(self._sector_radii)):
            sector = self._sectors[i]
            self._shadow_world.render(moderngl.TRIANGLES, vertices=sector.count, first=sector.first)
        self.program["light_vp"].write(np.ascontiguousarray(light_vp.T).tobytes())
        self.program["eye_pos"].value = tuple(float(v) for v in lighting.camera_position(view))
        inv_view_proj = np.linalg.inv(self.proj.astype(np.float64) @ view.astype(np.float64)).astype(np.float32)
        self._sky_program["inv_view_proj"].write(np.ascontiguousarray(inv_view_proj.T).tobytes())
        self._shadow_map.use(location=0)

    def _render(self, view: np.ndarray, kart_model: np.ndarray | None, out: np.ndarray | None) -> np.ndarray:
        ctx = self._ctx
        self.fbo.use()
        self.fbo.clear(depth=1.0)
        ctx.enable(moderngl.DEPTH_TEST)
        ctx.enable(moderngl.CULL_FACE)
        ctx.front_face = "cw"  # meshes wind counter-clockwise; the y flip in `proj` mirrors them
        ctx.depth_func = "<"
        self.program["view"].write(np.ascontiguousarray(view.T, np.float32).tobytes())
        # The kart first: it is nearest, so it hides what is behind it before that gets shaded.
        if kart_model is not None:
            self.program["model"].write(np.ascontiguousarray(kart_model.T, np.float32).tobytes())
            self._kart_vao.render(moderngl.TRIANGLES)
        self.program["model"].write(np.eye(4, dtype=np.float32).tobytes())
        for sector in self._visible_sectors(view):
            self._world_vao.render(moderngl.TRIANGLES, vertices=sector.count, first=sector.first)
        ctx.depth_func = "<="  # the sky sits exactly on the far plane: only uncovered pixels pass
        ctx.disable(moderngl.CULL_FACE)
        self._sky_vao.render(moderngl.TRIANGLES, vertices=3)
        if out is None:
            out = np.empty((NUM_CHANNELS, self.height, self.width, 3), np.uint8)
        self._finish()   # the drawing happens here, with the GIL free; the reads below are copies
        for i in range(NUM_CHANNELS):
            self.fbo.read_into(out[i], attachment=i, components=3, alignment=1)
        return out

    def _visible_sectors(self, view: np.ndarray) -> list[Sector]:
        """Sectors whose bounding sphere touches the view frustum, nearest first."""
        eye_space = self._sector_centres @ view[:3, :3].T.astype(np.float64) + view[:3, 3]   # (S, 3)
        depth = -eye_space[:, 2]  # in front of the camera is positive
        r = self._sector_radii
        tan_y = math.tan(math.radians(FOV_Y_DEG) / 2)
        tan_x = tan_y * self.width / self.height
        # Distances outside the near/far planes and the four side planes must stay below the radius.
        inside = (depth + r >= DEPTH_NEAR_M) & (depth - r <= DEPTH_FAR_M)
        inside &= (np.abs(eye_space[:, 0]) - depth * tan_x) / math.hypot(1.0, tan_x) <= r
        inside &= (np.abs(eye_space[:, 1]) - depth * tan_y) / math.hypot(1.0, tan_y) <= r
        inside |= np.isinf(r)
        distance = np.where(np.isinf(r), 0.0, (eye_space ** 2).sum(axis=1))
        order = np.flatnonzero(inside)[np.argsort(distance[inside], kind="stable")]
        return [self._sectors[i] for i in order]

    @property
    def _ctx(self) -> moderngl.Context:
        """The context of an open raster (close() hands it back)."""
        if self.ctx is None:
            raise GBufferError("this raster is closed", "engine")
        return self.ctx

    def close(self) -> None:
        """Release the GL objects made here and hand the context back for the next raster."""
        ctx, self.ctx = self.ctx, None
        if ctx is None:
            return
        with ctx:
            for gl_object in reversed(self._objects):
                gl_object.release()
        self._objects.clear()
        CONTEXTS.give_back(ctx)
