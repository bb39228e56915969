"""FlashRenderer: AlayaRenderer-Flash as a backend of the Renderer protocol."""

from __future__ import annotations

from pathlib import Path

import torch

from prompt_presets.conditioning import Conditioning, WeightedPrompt
from renderer import check_size
from renderer.base import Renderer, RendererError
from renderer.flash.config import TEMPORAL_SCALE
from renderer.flash.pipeline import FlashPipeline, default_device
from renderer.flash.sampler import FewStepSampler
from renderer.flash.session import FlashSession
from renderer.flash.text import UMT5PromptEncoder

DTYPES = {"bf16": torch.bfloat16, "bfloat16": torch.bfloat16, "fp16": torch.float16, "float16": torch.float16,
          "fp32": torch.float32, "float32": torch.float32}
SETTINGS = ("chunk_size", "num_steps", "timestep_shift", "recache_on_switch", "text_encoder", "unknown_prompt",
            "seed", "prompts")
UNKNOWN_PROMPT = ("error", "presets")


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


def _setting(settings: dict, name: str, cast):
    """settings[name] as int/float, None when absent; a bad value is a RendererError naming the setting."""
    if settings.get(name) is None:
        return None
    try:
        return cast(settings[name])
    except (TypeError, ValueError):
        raise RendererError(f"{name} must be a number, got {settings[name]!r}", name) from None


def check_device(device: str | None) -> str:
    device = device or default_device()
    if str(device).startswith("cuda") and not torch.cuda.is_available():
        raise RendererError(f"device {device!r} asked for but CUDA is not available here", "device")
    try:
        torch.device(device)
    except RuntimeError:
        raise RendererError(f"unknown device {device!r}", "device") from None
    return str(device)


class FlashRenderer(Renderer):
    """weights=DIR loads the official layout; weights=None builds random weights of `config` (default tiny):
    only for smoke runs and benchmarks, the images mean nothing.

    Settings: chunk_size (frames, a multiple of 4; default config.chunk_frames), num_steps, timestep_shift,
    recache_on_switch (re-render the short history when the prompt changes), text_encoder (a local Wan 2.1
    directory for prompts outside the cache), unknown_prompt ("error": a prompt with no cached embedding and no
    text encoder is a PromptError; "presets": it renders as the blend of its nearest presets), seed (random
    weights), prompts (extra prompts to embed, random weights only).
    """

    name = "flash"

    def __init__(self, weights: str | Path | None = None, device: str | None = None, dtype=None,
                 config: str | None = None, **settings):
        unknown = sorted(set(settings) - set(SETTINGS))
        if unknown:
            raise RendererError(f"unknown flash setting(s) {', '.join(unknown)}; known: {', '.join(SETTINGS)}")
        unknown_prompt = settings.get("unknown_prompt", "error")
        if unknown_prompt not in UNKNOWN_PROMPT:
            raise RendererError(f"unknown_prompt must be one of {', '.join(UNKNOWN_PROMPT)}, got {unknown_prompt!r}",
                                "unknown_prompt")
        chunk_size = _setting(settings, "chunk_size", int)
        if chunk_size is not None and (chunk_size < TEMPORAL_SCALE or chunk_size % TEMPORAL_SCALE):
            raise RendererError(f"chunk_size {chunk_size} must be a positive multiple of {TEMPORAL_SCALE}",
                                "chunk_size")
        num_steps, shift = _setting(settings, "num_steps", int), _setting(settings, "timestep_shift", float)
        if (num_steps is not None and num_steps < 1) or (shift is not None and not shift > 0):
            raise RendererError("num_steps must be >= 1 and timestep_shift > 0", "num_steps")
        device = check_device(device)
        torch_dtype = parse_dtype(dtype)

        if weights is not None:
            self.pipeline = FlashPipeline.from_dir(weights, device, torch_dtype, settings.get("text_encoder"))
        else:
            self.pipeline = FlashPipeline.random(config or "tiny", _setting(settings, "seed", int) or 0,
                                                 settings.get("prompts"), device, torch_dtype)
            if settings.get("text_encoder"):
                cfg = self.pipeline.config
                self.pipeline.prompts.encoder = UMT5PromptEncoder(settings["text_encoder"], cfg.text_len,
                                                                  cfg.text_dim, device)
        if unknown_prompt == "presets":
            self.pipeline.prompts.fallback = nearest_presets_conditioning
        cfg = self.pipeline.config
        self.pipeline.sampler = FewStepSampler(num_steps or cfg.num_steps, shift or cfg.timestep_shift)
        self.chunk_size = chunk_size or cfg.chunk_frames
        self.recache_on_switch = bool(settings.get("recache_on_switch", False))
        self.weights = str(weights) if weights is not None else None

    def open_session(self, width: int, height: int, seed: int = 0) -> FlashSession:
        check_size("flash", width, height)
        return FlashSession(self.pipeline, width, height, seed, self.chunk_size, self.recache_on_switch)

    def describe(self) -> dict:
        p = self.pipeline
        return {"name": self.name, "chunk_size": self.chunk_size, "config": p.config.name,
                "weights": self.weights or "random", "device": str(p.device), "dtype": str(p.dtype),
                "num_steps": p.sampler.num_steps, "timestep_shift": p.sampler.shift,
                "parameters": sum(p.parameter_counts().values())}
