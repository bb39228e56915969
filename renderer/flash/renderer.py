"""FlashRenderer: AlayaRenderer-Flash as a backend of the Renderer protocol."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import torch

from alaya_errors import validate
from prompt_presets.conditioning import Conditioning, WeightedPrompt
from renderer.base import Renderer, RendererError, check_size
from renderer.device import pick_device
from renderer.flash.decoder import STARTUP_FRAMES
from renderer.flash.pipeline import FlashPipeline
from renderer.flash.sampler import FewStepSampler
from renderer.flash.serving import codec_channels_last, share_chunk_steps
from renderer.flash.session import FlashSession
from renderer.flash.settings import FlashSettings
from renderer.flash.text import UMT5PromptEncoder

DTYPES = {"bf16": torch.bfloat16, "bfloat16": torch.bfloat16, "fp16": torch.float16, "float16": torch.float16,
          "fp32": torch.float32, "float32": torch.float32}
def nearest_presets_conditioning(text: str) -> Conditioning:
    """Free text with no embedding → the blend of its nearest presets (prompt_presets.matching's rule)."""
    from prompt_presets.matching import nearest_presets
    from prompt_presets.presets import get_preset

    return Conditioning(tuple(WeightedPrompt(get_preset(name).prompt, weight, name)
                              for name, weight in nearest_presets(text)))


def parse_dtype(dtype) -> torch.dtype | None:
    if dtype is None or isinstance(dtype, torch.dtype):
        return dtype
    try:
        return DTYPES[str(dtype).lower()]
    except KeyError:
        raise RendererError(f"unknown dtype {dtype!r}; choose one of {', '.join(DTYPES)}", "dtype") from None


class FlashRenderer(Renderer):
    """weights=DIR loads the official layout; weights=None builds random weights of `config` (default tiny):
    only for smoke runs and benchmarks, the images mean nothing.

    Settings (FlashSettings): chunk_size (frames, a multiple of 4; default config.chunk_frames); the sampler
    (num_steps, timestep_shift, sigma_max, sampler_update euler | renoise), trim_startup_frames and
    gbuffer_input_range ("0..1" | "-1..1"), each overriding the weights' config; recache_on_switch (re-render
    the short history when the prompt changes), overlap_chunks (a live session decodes a chunk on a second
    thread while the next one denoises; CPU only), text_encoder (a local Wan 2.1
    directory for prompts outside the cache), unknown_prompt ("error": a prompt with no cached embedding and no
    text encoder is a PromptError; "presets": it renders as the blend of its nearest presets), seed (random
    weights), prompts (extra prompts to embed, random weights only), threads (torch's CPU threads, process-wide).
    """

    name = "flash"

    def __init__(self, weights: str | Path | None = None, device: str | None = None, dtype=None,
                 config: str | None = None, **settings):
        opts: FlashSettings = validate(FlashSettings, settings, RendererError)
        if opts.threads is not None:
            torch.set_num_threads(opts.threads)     # process-wide: a server loads its renderer once
        torch_device = pick_device(device)
        torch_dtype = parse_dtype(dtype)
        if weights is not None:
            self.pipeline = FlashPipeline.from_dir(weights, torch_device, torch_dtype, opts.text_encoder)
        else:
            self.pipeline = FlashPipeline.random(config or "tiny", opts.seed, opts.prompts, torch_device, torch_dtype)
            if opts.text_encoder:
                cfg = self.pipeline.config
                self.pipeline.prompts.encoder = UMT5PromptEncoder(opts.text_encoder, cfg.text_len, cfg.text_dim,
                                                                  torch_device)
        if opts.unknown_prompt == "presets":
            self.pipeline.prompts.fallback = nearest_presets_conditioning
        pipe = self.pipeline
        pipe.config = cfg = dataclasses.replace(pipe.config, **opts.config_overrides())
        pipe.sampler = FewStepSampler.from_config(cfg)
        pipe.gbuffer_encoder.input_range = cfg.gbuffer_input_range
        share_chunk_steps(pipe)
        if pipe.device.type == "cpu":
            codec_channels_last(pipe.gbuffer_encoder, pipe.decoder, pipe.refiner)
        self.chunk_size = opts.chunk_size or cfg.chunk_frames
        self.recache_on_switch = opts.recache_on_switch
        self.overlap_chunks = opts.overlap_chunks and pipe.device.type == "cpu"
        self.weights = str(weights) if weights is not None else None

    def open_session(self, width: int, height: int, seed: int = 0) -> FlashSession:
        check_size("flash", width, height)
        return FlashSession(self.pipeline, width, height, seed, self.chunk_size, self.recache_on_switch,
                            self.overlap_chunks)

    def describe(self) -> dict:
        p = self.pipeline
        return {"name": self.name, "chunk_size": self.chunk_size, "config": p.config.name,
                "weights": self.weights or "random", "device": str(p.device), "dtype": str(p.dtype),
                "num_steps": p.sampler.num_steps, "timestep_shift": p.sampler.shift,
                "sigma_max": p.sampler.sigma_max, "sampler_update": p.sampler.update,
                "trim_startup_frames": p.config.trim_startup_frames,
                "latency_frames": STARTUP_FRAMES if p.config.trim_startup_frames else 0,
                "gbuffer_encoder": p.gbuffer_encoder.family, "gbuffer_input_range": p.config.gbuffer_input_range,
                "text_sink": p.text_sink_status, "parameters": sum(p.parameter_counts().values())}
