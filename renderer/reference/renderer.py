"""The reference renderer: a deferred style shader, on OpenGL (gl.py, Mesa's llvmpipe on a CPU) or in torch
(CPU, or CUDA when asked or present). Both backends draw the same look (tests/test_reference_golden.py).

Per frame: decode the G-buffer → change the surface for the style (snow, charred lava ground) → PBR lighting
plus emissive effects (lava, neon edges, caustics) → atmosphere (sky, fog, haze) and the thermal palette →
bloom, tone map, grade, vignette → uint8. Frames are independent, so a chunk is one frame: a live session hands
each frame over as soon as it is rendered instead of waiting for a chunk to fill (interactive latency).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Sequence

import numpy as np
import torch

from gbuffer.frame import GBufferFrame
from prompt_presets.conditioning import Conditioning
from renderer.base import Renderer, RendererError, RenderResult, RenderSession, check_chunk, check_size, renderer_spec
from renderer.device import pick_device
from renderer.reference import effects, lighting, post
from renderer.reference.style import Style, StyleCache
from renderer.reference.surface import SurfaceDecoder, frame_to_tensor
from renderer.timing import StageClock, peak_memory_bytes, start_chunk

if TYPE_CHECKING:     # gl imports moderngl, which the torch backend does not need
    from renderer.reference.gl import StyleShader

STAGES = ("decode", "lighting", "style", "post", "to_uint8")       # the torch backend's stages
MAX_CHUNK = 16       # frames are independent: render() takes several at once (offline callers, tests)
log = logging.getLogger("alaya.renderer")


class ReferenceRenderer(Renderer):
    """`backend`: "gl" (OpenGL, llvmpipe on a CPU), "torch", or "auto": torch on CUDA, else GL where a headless
    context opens, else torch (said once in the log)."""

    name = "reference"
    chunk_size = 1

    def __init__(self, device: str | None = None, backend: str = "auto"):
        backends = renderer_spec(self.name).options["backend"]
        if backend not in backends:
            raise RendererError(f"unknown reference backend {backend!r}; choose one of {', '.join(backends)}",
                                "backend")
        self.device = pick_device(device)
        if backend == "gl" and self.device.type != "cpu":
            raise RendererError("the gl backend renders with OpenGL, not on a torch device; use device cpu", "backend")
        self.shader: StyleShader | None = None
        if backend == "gl" or (backend == "auto" and self.device.type == "cpu"):
            from renderer.reference.gl import GLUnavailable, StyleShader

            try:
                self.shader = StyleShader.shared()
            except GLUnavailable as exc:
                if backend == "gl":
                    raise
                log.warning("reference renderer: %s; rendering with torch instead", exc.detail)
        self.backend = "gl" if self.shader is not None else "torch"

    def open_session(self, width: int, height: int, seed: int = 0) -> RenderSession:
        check_size(self.name, width, height)
        if self.shader is not None:
            return GLReferenceSession(self, self.shader, width, height, seed)
        return ReferenceSession(self, width, height, seed)

    def describe(self) -> dict:
        gl = {"gl_renderer": self.shader.gl_renderer} if self.shader is not None else {}
        return {**super().describe(), "device": str(self.device), "backend": self.backend, **gl}


class ReferenceSession(RenderSession):
    stages = STAGES

    def __init__(self, renderer: ReferenceRenderer, width: int, height: int, seed: int):
        self.width, self.height, self.seed = width, height, seed  # no randomness: the seed changes nothing
        self.chunk_size = renderer.chunk_size
        self.max_chunk = MAX_CHUNK
        self.device = renderer.device
        self.decoder = SurfaceDecoder(height, width, self.device)
        self.styles = StyleCache(self.device)
        self.vignette = post.Vignette(height, width, self.device)
        self.encode_srgb = post.SrgbEncoder(self.device)

    def render(self, frames: Sequence[GBufferFrame], conditioning: Sequence[Conditioning]) -> RenderResult:
        check_chunk(self, frames, conditioning)
        start_chunk(self.device)
        timings = dict.fromkeys(STAGES, 0.0)
        out = np.empty((len(frames), self.height, self.width, 3), np.uint8)
        with torch.inference_mode():
            for i, (frame, cond) in enumerate(zip(frames, conditioning)):
                out[i] = self._render_frame(frame, self.styles.get(cond), timings)
        return RenderResult(out, timings, peak_memory_bytes(self.device))

    def _render_frame(self, frame: GBufferFrame, style: Style, timings: dict[str, float]) -> np.ndarray:
        clock = StageClock(self.device, timings)
        s = self.decoder.decode(frame.data)
        clock.lap("decode")

        albedo, roughness, metallic = s.albedo, s.roughness, s.metallic
        if style.snow > 1e-3:
            albedo, roughness, metallic = effects.apply_snow(s, style.snow, albedo, roughness, metallic)
        emissive = None
        if style.lava > 1e-3:
            albedo, emissive = effects.lava_glow(s, style, albedo)
        if style.caustics > 1e-3:
            # caustics are focused sunlight: they brighten the diffuse surface colour
            sun = style.sun_color * style.sun_intensity
            caustic = effects.caustics(s, style, frame.timestamp) * style.caustic_color * sun * albedo
            emissive = caustic if emissive is None else emissive + caustic
        radiance = lighting.shade(s, albedo, roughness, metallic, style)
        if emissive is not None:
            radiance = radiance + emissive
        clock.lap("lighting")

        if style.edge_glow > 1e-3:
            radiance = radiance + effects.neon_edges(s, style)
        radiance = torch.where(s.sky, lighting.sky(s, style), effects.fog(s, style, radiance))
        if style.haze > 1e-3:
            radiance = effects.haze(s, style, radiance, frame.timestamp)
        if style.infrared > 1e-3:
            radiance = effects.infrared(s, style, radiance, metallic)
        clock.lap("style")

        display = self.vignette(post.to_display(post.bloom(radiance, style), style, self.encode_srgb), style.vignette)
        clock.lap("post")
        rgb = post.to_uint8(display).cpu().numpy()
        clock.lap("to_uint8")
        return rgb

    def close(self) -> None:
        self.styles = StyleCache(self.device)


class GLReferenceSession(RenderSession):
    """A session on the process's GL style shader. It holds no GL objects of its own (the shader keeps the
    textures per size), so closing it frees only its style cache."""

    def __init__(self, renderer: ReferenceRenderer, shader: StyleShader, width: int, height: int, seed: int):
        from renderer.reference.gl import GL_STAGES

        self.stages = GL_STAGES
        self.width, self.height, self.seed = width, height, seed
        self.chunk_size = renderer.chunk_size
        self.max_chunk = MAX_CHUNK
        self.shader = shader
        self.styles = StyleCache(torch.device("cpu"))

    def render(self, frames: Sequence[GBufferFrame], conditioning: Sequence[Conditioning]) -> RenderResult:
        check_chunk(self, frames, conditioning)
        timings = dict.fromkeys(self.stages, 0.0)
        out = np.empty((len(frames), self.height, self.width, 3), np.uint8)
        for i, (frame, cond) in enumerate(zip(frames, conditioning)):
            data = frame.data
            if data.shape[1:3] != (self.height, self.width):   # a source of another size: resized as in torch
                data = frame_to_tensor(data, self.height, self.width, torch.device("cpu")).permute(0, 2, 3, 1).numpy()
            out[i], stage_ms = self.shader.render(data, self.styles.get(cond), frame.timestamp)
            for stage, ms in stage_ms.items():
                timings[stage] += ms
        return RenderResult(out, timings, peak_memory_bytes(torch.device("cpu")))

    def close(self) -> None:
        self.styles = StyleCache(torch.device("cpu"))
