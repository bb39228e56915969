"""The reference renderer on OpenGL: the torch path's look (gl_shaders.py mirrors it function by function), at a
fraction of its CPU time. Mesa's llvmpipe compiles each pass into vector code and runs it on every core, and a
pass reads and writes each pixel once instead of once per torch operation.

One GL context serves the whole process, on a thread of its own: every GL call runs there, so the context is
never current on two threads, and sessions on many threads (live sessions, the batch thread, offline renders)
simply queue for it. Each pass compiles once per set of style features. The intermediate textures are kept per frame
size, for a few sizes, and are shared by the sessions of that size, which take turns on the one thread anyway. Both
caches are bounded (SIZES_KEPT, PROGRAMS_KEPT; least recently used out), so a studio that serves sessions for days
holds the same GL objects after its thousandth session as after its tenth (issue 29).
"""

from __future__ import annotations

import functools
import math
import os
import threading
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, fields

import moderngl
import numpy as np
import torch

from gbuffer.frame import NUM_CHANNELS
from gbuffer.gl_finish import gil_free_finish
from prompt_presets.reference_params import ReferenceParams
from renderer.base import RendererError
from renderer.reference import gl_shaders as glsl
from renderer.reference.effects import IRONBOW
from renderer.reference.post import SrgbEncoder, gaussian_kernel
from renderer.reference.style import Style, make_style
from renderer.reference.surface import SRGB_LUT, VERTICAL_FOV_DEG, srgb_to_linear
from renderer.timing import StageClock

GL_STAGES = ("upload", "shade", "post", "readback")
_CPU = torch.device("cpu")        # the stage clock's device: GL work is waited for in `_wait`, not by torch
BLOOM_SIGMA = 1.5                # post.bloom's blur
_TAN_HALF_FOV = math.tan(math.radians(VERTICAL_FOV_DEG) / 2)   # SurfaceDecoder's camera rays
SIZES_KEPT = 4                   # frame sizes whose textures stay allocated
# compiled (pass, features) programs kept: the 16 presets compile 24 between them; a blend can switch on any
# union of features (up to 2^14 sets), so without a bound free-text prompts would compile programs without end
PROGRAMS_KEPT = 128
UNROLLED_RADIUS_MAX = 16         # box blurs up to this radius get a program with the radius compiled in (unrolled)
# Units the samplers read from; every program binds its samplers to these once.
_UNITS = {"gbuf": 0, "src": 2, "aux": 3, "prep": 4, "lava_local": 5, "ao_near": 6}


class GLUnavailable(RendererError):
    """No headless OpenGL context here (no libEGL, no Mesa, no driver)."""


def _quarter(size: tuple[int, int]) -> tuple[int, int]:
    return (math.ceil(size[0] / 4), math.ceil(size[1] / 4))   # avg_pool2d(4, ceil_mode=True)


@dataclass
class _Target:
    texture: moderngl.Texture
    fbo: moderngl.Framebuffer
    size: tuple[int, int]


class _SizeTargets:
    """The textures one frame size needs: G-buffer upload, every pass's output, the RGBA8 result."""

    def __init__(self, ctx, width: int, height: int):
        self.size = (width, height)
        self.quarter = _quarter(self.size)
        self.sixteenth = _quarter(self.quarter)
        self.gbuf = ctx.texture_array((width, height, NUM_CHANNELS), 3, dtype="f1", alignment=1)
        self._ctx = ctx
        self._targets: dict[str, _Target] = {}

    def target(self, name: str, size: tuple[int, int], dtype: str = "f4") -> _Target:
        t = self._targets.get(name)
        if t is None:
            texture = self._ctx.texture(size, 4, dtype=dtype)
            texture.filter = (moderngl.LINEAR, moderngl.LINEAR)   # for gl_shaders.upsample; texelFetch ignores it
            texture.repeat_x = texture.repeat_y = False
            t = self._targets[name] = _Target(texture, self._ctx.framebuffer(color_attachments=[texture]), size)
        return t

    def release(self) -> None:
        for t in self._targets.values():
            t.fbo.release()
            t.texture.release()
        self.gbuf.release()


class StyleShader:
    """The process's GL style shader. `StyleShader.shared()` opens it once (per process: a forked child opens
    its own); `render` turns one G-buffer frame into uint8 RGB."""

    _shared: "StyleShader | None" = None
    _shared_lock = threading.Lock()

    @classmethod
    def shared(cls) -> "StyleShader":
        with cls._shared_lock:
            if cls._shared is None or cls._shared.pid != os.getpid():
                cls._shared = cls()
            return cls._shared

    def __init__(self):
        self.pid = os.getpid()
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="alaya-gl-style")
        try:
            self._thread.submit(self._open).result()
        except BaseException:
            self._thread.shutdown(wait=False)
            raise

    # ---- on the GL thread ----------------------------------------------------------------------------------

    def _open(self) -> None:
        try:
            # moderngl-stubs 5.13 type each of **settings as Dict[str, Any] (meant: the whole **settings)
            self.ctx = moderngl.create_context(standalone=True, backend="egl")  # type: ignore[arg-type]
        except Exception as exc:  # noqa: BLE001 - no libEGL / no driver: one line, and the torch path takes over
            raise GLUnavailable(f"cannot open a headless OpenGL context (EGL): {' '.join(str(exc).split())}",
                                "renderer") from None
        self.gl_renderer = self.ctx.info.get("GL_RENDERER", "?")   # e.g. "llvmpipe (LLVM 15.0.6, 256 bits)"
        self._wait = gil_free_finish(self.ctx.finish)   # the frame's work, without holding the GIL
        self._programs: OrderedDict[tuple[str, tuple[str, ...]], tuple] = OrderedDict()
        self._blur_weights = gaussian_kernel(BLOOM_SIGMA).tolist()
        assert len(self._blur_weights) == 9, "gl_shaders.BLUR has 9 taps"
        self.sizes: OrderedDict[tuple[int, int], _SizeTargets] = OrderedDict()

    def _program(self, name: str, features: tuple[str, ...] = ()) -> tuple:
        """(program, vertex array) of pass `name` (a gl_shaders constant) with `features` compiled in; compiled
        once per feature set (a few per style: every preset's first frame compiles its own)."""
        key = (name, features)
        found = self._programs.get(key)
        if found is None:
            source = glsl.fragment(getattr(glsl, name), surface=name in ("PREP", "SHADE"), features=features)
            p = self.ctx.program(vertex_shader=glsl.VERTEX, fragment_shader=source)
            for sampler, unit in _UNITS.items():
                if (member := _uniform(p, sampler)) is not None:
                    member.value = unit
            for table, values in _TABLES.items():
                if (member := _uniform(p, table)) is not None:
                    member.value = values
            if (member := _uniform(p, "weights")) is not None:    # BLUR's and GLOW's taps
                member.value = self._blur_weights
            found = self._programs[key] = (p, self.ctx.vertex_array(p, []))
            if len(self._programs) > PROGRAMS_KEPT:
                for gl_object in self._programs.popitem(last=False)[1][::-1]:
                    gl_object.release()
        self._programs.move_to_end(key)
        return found

    def _targets(self, width: int, height: int) -> _SizeTargets:
        key = (width, height)
        t = self.sizes.get(key)
        if t is None:
            t = self.sizes[key] = _SizeTargets(self.ctx, width, height)
            if len(self.sizes) > SIZES_KEPT:
                self.sizes.popitem(last=False)[1].release()
        self.sizes.move_to_end(key)
        return t

    def _draw(self, name: str, out: _Target, inputs: dict[str, moderngl.Texture], features: tuple[str, ...] = (),
              **uniforms) -> None:
        """One pass: pass `name` (with `features`) reads `inputs` (sampler → texture) and fills `out`."""
        prog, vao = self._program(name, features)
        for sampler, texture in inputs.items():
            texture.use(_UNITS[sampler])
        for uniform, value in uniforms.items():
            member = _uniform(prog, uniform)  # a uniform the pass does not use is compiled out
            if member is not None:
                member.value = value
        out.fbo.use()
        vao.render(vertices=3)

    def _render(self, data: np.ndarray, style: Style, time_s: float) -> tuple[np.ndarray, dict[str, float]]:
        clock = StageClock(_CPU)
        _, height, width, _ = data.shape
        t = self._targets(width, height)
        t.gbuf.write(data)
        t.gbuf.use(_UNITS["gbuf"])
        clock.lap("upload")
        values = _style_uniforms(style.params)
        looks, grading = style_features(style)
        full, quarter, sixteenth = t.size, t.quarter, t.sixteenth

        prep = lava_local = t.target("prep", full)
        if "LAVA" in looks or "NEON" in looks:
            self._draw("PREP", prep, {}, looks, size=full, tan_half=_TAN_HALF_FOV, **values)
        if "LAVA" in looks:      # effects.lava_glow's 9x9 local mean
            lava_local = self._box(t, prep, "lava", radius=4)
        ao_small = t.target("ao_small", quarter)  # lighting.ambient_occlusion: the stored depth at 1/4, averaged
        self._draw("POOL", ao_small, {}, ("GBUF_DEPTH",) + _whole_blocks(quarter, full), size=quarter,
                   src_size=full, threshold=0.0)
        ao = self._box(t, ao_small, "ao", radius=max(1, height // 80))
        radiance = t.target("radiance", full)
        inputs = {"prep": prep.texture, "lava_local": lava_local.texture, "ao_near": ao.texture}
        self._draw("SHADE", radiance, inputs, looks, size=full, tan_half=_TAN_HALF_FOV,
                   time_s=float(time_s), **values)
        self._wait()
        clock.lap("shade")

        glow = radiance          # unused without bloom
        if "BLOOM" in grading:   # post.bloom: 1/4 and 1/16 levels of the bright pass, blurred, summed at 1/4
            small = t.target("bloom_small", quarter)
            self._draw("POOL", small, {"src": radiance.texture}, _whole_blocks(quarter, full), size=quarter,
                       src_size=full, threshold=float(style.bloom_threshold))
            tiny = t.target("bloom_tiny", sixteenth)
            self._draw("POOL", tiny, {"src": small.texture}, _whole_blocks(sixteenth, quarter), size=sixteenth,
                       src_size=quarter, threshold=0.0)
            small_across = t.target("bloom_small_across", quarter)   # GLOW blurs it downwards
            self._draw("BLUR", small_across, {"src": small.texture}, size=quarter, step_dir=(1, 0))
            tiny_blurred = self._blur(t, tiny, "bloom_tiny")
            glow = t.target("bloom_glow", quarter)
            self._draw("GLOW", glow, {"src": small_across.texture, "aux": tiny_blurred.texture}, size=quarter)
        out = t.target("out", full, dtype="f1")
        self._draw("FINISH", out, {"src": radiance.texture, "aux": glow.texture}, grading,
                   size=full, **values)
        self._wait()
        clock.lap("post")
        rgb = np.frombuffer(out.fbo.read(components=3, alignment=1), np.uint8).reshape(height, width, 3)
        clock.lap("readback")
        return rgb, clock.timings

    def _box(self, t: _SizeTargets, src: _Target, name: str, radius: int) -> _Target:
        across = t.target(f"{name}_across", src.size)
        features = (f"RADIUS {radius}",) if radius <= UNROLLED_RADIUS_MAX else ()
        self._draw("BOX", across, {"src": src.texture}, features, size=src.size, step_dir=(1, 0), radius=radius)
        down = t.target(name, src.size)
        self._draw("BOX", down, {"src": across.texture}, features, size=src.size, step_dir=(0, 1), radius=radius)
        return down

    def _blur(self, t: _SizeTargets, src: _Target, name: str) -> _Target:
        across = t.target(f"{name}_blur_across", src.size)
        self._draw("BLUR", across, {"src": src.texture}, size=src.size, step_dir=(1, 0))
        down = t.target(f"{name}_blurred", src.size)
        self._draw("BLUR", down, {"src": across.texture}, size=src.size, step_dir=(0, 1))
        return down

    # ---- from any thread ------------------------------------------------------------------------------------

    def render(self, data: np.ndarray, style: Style, time_s: float) -> tuple[np.ndarray, dict[str, float]]:
        """uint8 (5, H, W, 3) G-buffer → uint8 (H, W, 3) RGB and the stage times (ms) of the GL thread."""
        try:
            return self._thread.submit(self._render, np.ascontiguousarray(data, np.uint8), style, time_s).result()
        except moderngl.Error as exc:   # e.g. a size beyond the driver's texture limit
            raise RendererError(f"OpenGL: {' '.join(str(exc).split())}", "renderer") from None


def _whole_blocks(size: tuple[int, int], src_size: tuple[int, int]) -> tuple[str, ...]:
    """POOL's feature when every output pixel averages a whole 4x4 block (sizes divisible by 4, the usual case):
    the loop bounds are then constants, the loop unrolls, and the pass costs about half."""
    return ("WHOLE_BLOCKS",) if tuple(src_size) == (size[0] * 4, size[1] * 4) else ()


@functools.lru_cache(maxsize=128)
def _uniform(program: moderngl.Program, name: str) -> moderngl.Uniform | None:
    """The program's uniform `name`, or None where the compiler dropped it (a pass that does not use it)."""
    member = program.get(name, None)
    assert member is None or isinstance(member, moderngl.Uniform), f"{name} is not a plain uniform"
    return member


def _style_uniforms(params: ReferenceParams) -> dict:
    """The style's fields as uniform values (vec3 fields from the style's tensors: directions are unit there).
    Cached: a schedule holds one style for many frames, and building these takes about 0.1 ms of the GIL."""
    style = make_style(params, _CPU)
    out: dict[str, object] = {}
    for f in fields(style.params):
        value = getattr(style, f.name)
        out[f.name] = tuple(float(v) for v in value.flatten().tolist()) if hasattr(value, "flatten") else float(value)
    out["ironbow"] = _IRONBOW_LINEAR
    return out


# The torch path's lookup tables, as the shaders' uniform arrays (a table read costs less than a pow on llvmpipe,
# and the values are then exactly torch's)
_TABLES = {"srgb_lut": SRGB_LUT.tolist(), "srgb_encode": SrgbEncoder(_CPU).lut.tolist()}

# effects._palette's table: the ironbow stops, linearised the same way
_IRONBOW_LINEAR = [tuple(row) for row in srgb_to_linear(torch.tensor(IRONBOW, dtype=torch.float32)).tolist()]


def style_features(style: Style) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The parts of the torch path a style switches on, as the shaders' feature names: (SHADE's and PREP's,
    FINISH's). The tests are the torch path's own (effects run above 1e-3; post.grade skips identity steps)."""
    p = style.params
    looks = (("SNOW", p.snow > 1e-3), ("LAVA", p.lava > 1e-3), ("CAUSTICS", p.caustics > 1e-3),
             ("NEON", p.edge_glow > 1e-3), ("HAZE", p.haze > 1e-3), ("INFRARED", p.infrared > 1e-3))
    grading = (("BLOOM", p.bloom > 1e-3), ("LIFT", p.lift != (0.0, 0.0, 0.0)), ("GAIN", p.gain != (1.0, 1.0, 1.0)),
               ("GAMMA", p.gamma != (1.0, 1.0, 1.0)), ("CONTRAST", p.contrast != 1.0),
               ("SATURATION", p.saturation != 1.0), ("DUOTONE", p.duotone > 1e-3), ("VIGNETTE", p.vignette > 1e-3))
    return tuple(n for n, on in looks if on), tuple(n for n, on in grading if on)
