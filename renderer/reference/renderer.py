"""The reference renderer: a deferred style shader in torch, CPU by default, CUDA when asked or present.

Per frame: decode the G-buffer → change the surface for the style (snow, charred lava ground) → PBR lighting
plus emissive effects (lava, neon edges, caustics) → atmosphere (sky, fog, haze) and the thermal palette →
bloom, tone map, grade, vignette → uint8. Frames are independent, so a chunk is one frame: a live session hands
each frame over as soon as it is rendered instead of waiting for a chunk to fill (interactive latency).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import torch

from gbuffer.frame import GBufferFrame
from prompt_presets.conditioning import Conditioning
from renderer import check_size
from renderer.base import Renderer, RendererError, RenderResult, RenderSession, check_chunk
from renderer.device import pick_device
from renderer.reference import effects, lighting, post
from renderer.reference.style import Style, StyleCache
from renderer.reference.surface import SurfaceDecoder
from renderer.timing import StageClock, peak_memory_bytes, start_chunk

STAGES = ("decode", "lighting", "style", "post", "to_uint8")
MAX_CHUNK = 16       # frames are independent: render() takes several at once (offline callers, tests)


class ReferenceRenderer(Renderer):
    name = "reference"
    chunk_size = 1

    def __init__(self, device: str | None = None):
        self.device = pick_device(device)

    def open_session(self, width: int, height: int, seed: int = 0) -> "ReferenceSession":
        check_size(self.name, width, height)
        return ReferenceSession(self, width, height, seed)

    def describe(self) -> dict:
        return {**super().describe(), "device": str(self.device)}


class ReferenceSession(RenderSession):
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

