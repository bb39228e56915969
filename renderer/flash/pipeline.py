"""FlashPipeline: the Flash modules, loaded from a weights directory with one call, and one chunk's stages.

    encode_gbuffer: G-buffer frames (B, T, 5, 3, H, W) → G-buffer latent (B, 80, t, h, w)
    denoise:        noise + G-buffer latent + history + prompt → clean RGB latent (B, 16, t, h, w), 4 steps
    decode:         RGB latent → RGB frames (B, T, 3, H, W), stateful across chunks; a guided decoder (guide.py)
                    draws them from the latent and the chunk's full-size G-buffer frames, or a G-buffer refiner
                    (small configs, refiner.py) refines them with those frames and the prompt
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Callable, Iterator

import torch

from prompt_presets.presets import load_presets
from renderer.base import RendererError
from renderer.device import pick_device
from renderer.flash.checkpoint import KeyMap
from renderer.flash.chunk_steps import ChunkSteps, history_tokens
from renderer.flash.config import FlashConfig, get_config
from renderer.flash.decoder import TinyDecoder
from renderer.flash.gbuffer_encoder import GBufferEncoder
from renderer.flash.history import HistoryInputs
from renderer.flash.refiner import GBufferRefiner
from renderer.flash.sampler import FewStepSampler
from renderer.flash.taehv import StreamMemory
from renderer.flash.text import (CACHE_FILE, PromptBank, SentenceProjection, load_cache, prompt_encoder,
                                 random_embedding, save_cache)
from renderer.flash.transformer import FlashTransformer
from renderer.flash import weights as layout


def default_dtype(device: torch.device | str) -> torch.dtype:
    return torch.bfloat16 if str(device).startswith("cuda") else torch.float32


def preset_prompts() -> list[str]:
    """Full prompt texts of the studio's presets: what a random-weights text cache holds."""
    return [p.prompt for p in load_presets().values()]


def cast_transformer(model: FlashTransformer, dtype: torch.dtype) -> FlashTransformer:
    """Cast to dtype but keep what diffusers keeps in fp32 (time embedder, modulation tables, norms)."""
    keep = tuple(model._keep_in_fp32_modules)
    for name, param in model.named_parameters():
        wanted = torch.float32 if any(part in keep for part in name.split(".")) else dtype
        param.data = param.data.to(wanted)
    return model


class FlashPipeline:
    def __init__(self, config: FlashConfig, transformer: FlashTransformer, gbuffer_encoder: GBufferEncoder,
                 decoder: TinyDecoder, prompts: PromptBank, device: str | torch.device = "cpu",
                 dtype: torch.dtype = torch.float32, refiner: GBufferRefiner | None = None):
        if bool(config.refiner_looks) != (refiner is not None):
            raise RendererError(f"config {config.name} has refiner_looks={config.refiner_looks} but "
                                f"{'no' if refiner is None else 'a'} refiner was given")
        if (refiner is not None or decoder.guide is not None) and config.trim_startup_frames:
            raise RendererError("a G-buffer refiner or guide needs the default alignment (trim_startup_frames "
                                "off): its decoded frame i must show G-buffer frame i")
        if refiner is not None and decoder.guide is not None:
            raise RendererError("a guided decoder draws the picture itself: it takes no G-buffer refiner")
        self.config = config
        self.device, self.dtype = torch.device(device), dtype
        # diffusers' ModelMixin.to is wrapped (functools.wraps of Module.to), and its type asks for self twice
        moved = transformer.to(self.device)  # type: ignore[arg-type]
        self.transformer = cast_transformer(moved, dtype).eval().requires_grad_(False)
        self.gbuffer_encoder = gbuffer_encoder.to(self.device, dtype).eval().requires_grad_(False)
        self.decoder = decoder.to(self.device, dtype).eval().requires_grad_(False)
        self.refiner = refiner.to(self.device, dtype).eval().requires_grad_(False) if refiner is not None else None
        self.prompts = prompts
        self.sampler = FewStepSampler.from_config(config)
        # serving's choice (serving.share_chunk_steps): a chunk's steps without gradients as ChunkSteps, which
        # computes what they share once; off, every step is the library's whole forward
        self.shared_steps = False

    # ---- construction -------------------------------------------------------------------------------------
    @staticmethod
    def build_modules(config: FlashConfig) -> tuple[FlashTransformer, GBufferEncoder, TinyDecoder]:
        return (FlashTransformer(config), GBufferEncoder.for_config(config),
                TinyDecoder(config.decoder_channels, config.guide_width))

    @classmethod
    def random(cls, config: FlashConfig | str = "tiny", seed: int = 0, prompts: list[str] | None = None,
               device: torch.device | str | None = None, dtype: torch.dtype | None = None) -> "FlashPipeline":
        """Randomly initialised modules (deterministic for a seed) and random prompt embeddings."""
        config = get_config(config) if isinstance(config, str) else config
        torch_device = pick_device(device)
        torch.manual_seed(seed)
        with torch.device(torch_device):        # build in place: a full model on the GPU needs no CPU copy
            modules = cls.build_modules(config)
            refiner = (GBufferRefiner(config.refiner_looks, config.text_dim, config.refiner_hidden)
                       if config.refiner_looks else None)
        texts = preset_prompts() + list(prompts or [])
        bank = PromptBank(config.text_len, config.text_dim,
                          {t: random_embedding(t, config.text_len, config.text_dim) for t in texts})
        return cls(config, *modules, bank, torch_device, dtype or default_dtype(torch_device), refiner)

    @classmethod
    def from_dir(cls, root: str | Path, device: torch.device | str | None = None, dtype: torch.dtype | None = None,
                 text_encoder: str | Path | None = None, prompt_fallback: Callable | None = None,
                 key_map: KeyMap | None = None) -> "FlashPipeline":
        """Load a directory in the official layout: bf16 on CUDA, fp32 on CPU unless `dtype` is given.
        `key_map(key) -> key | None` renames (or drops) checkpoint keys of another layout."""
        root = Path(root)
        torch_device = pick_device(device)
        dtype = dtype or default_dtype(torch_device)
        plan = layout.WeightsPlan(root, key_map)
        transformer, gbuffer_encoder, decoder = plan.load(torch_device, dtype)
        assert plan.config is not None and plan.decoder_channels is not None   # load() raised unless both are read
        refiner = plan.load_refiner(torch_device, dtype)
        config = dataclasses.replace(plan.config, decoder_channels=plan.decoder_channels, guide_width=plan.guide_width)
        cache_path = root / CACHE_FILE
        cached = load_cache(cache_path) if cache_path.is_file() else {}
        encoder = prompt_encoder(config.text_encoder, root, config.text_len, config.text_dim, text_encoder,
                                 torch_device)
        bank = PromptBank(config.text_len, config.text_dim, cached, encoder, prompt_fallback, cache_path)
        return cls(config, transformer, gbuffer_encoder, decoder, bank, torch_device, dtype, refiner)

    def save(self, root: str | Path, dtype: torch.dtype | None = None) -> None:
        """Write this pipeline in the official layout (plus its prompt cache)."""
        root = Path(root)
        dtype = dtype or (torch.bfloat16 if self.config.name == "full" else torch.float32)
        layout.save_layout(root, self.config, self.transformer, self.gbuffer_encoder, self.decoder, dtype,
                           self.refiner)
        save_cache(root / CACHE_FILE, self.prompts.cached)
        if isinstance(self.prompts.encoder, SentenceProjection):       # what a "minilm" config loads beside it
            self.prompts.encoder.save(root)

    def parameter_counts(self) -> dict[str, int]:
        modules = [("transformer", self.transformer), ("gbuffer_encoder", self.gbuffer_encoder),
                   ("decoder", self.decoder)] + ([("refiner", self.refiner)] if self.refiner is not None else [])
        return {name: sum(p.numel() for p in m.parameters()) for name, m in modules}

    # ---- one chunk ----------------------------------------------------------------------------------------
    @property
    def text_sink_status(self) -> str:
        return self.transformer.text_sink_status

    def encode_gbuffer(self, frames: torch.Tensor, memory: StreamMemory | None = None) -> torch.Tensor:
        return self.gbuffer_encoder(frames.to(self.device, self.dtype), memory)

    def velocity(self, noisy: torch.Tensor, sigma: float, gbuffer_latent: torch.Tensor, prompt: torch.Tensor,
                 history: HistoryInputs, jump_end: float | None = None) -> torch.Tensor:
        """The transformer's velocity for the noisy RGB latent (B, 16, t, h, w) at noise level sigma; a mean-flow
        model's average velocity from sigma to `jump_end`."""
        hidden = torch.cat([noisy, gbuffer_latent], dim=1).to(self.dtype)
        out = self.transformer(hidden, self._timestep(noisy, sigma, jump_end), prompt.to(self.device, self.dtype),
                               **history.kwargs(), return_dict=False)[0]
        return out.float()

    def chunk_velocity(self, gbuffer_latent: torch.Tensor, prompt: torch.Tensor, history: HistoryInputs,
                       tokens: torch.Tensor | None = None
                       ) -> Callable[[torch.Tensor, float, float | None], torch.Tensor]:
        """`velocity` for one chunk's steps: (noisy, sigma, jump_end) → velocity. With `shared_steps` and no
        gradients, what the steps share is computed here, once (ChunkSteps); `tokens`, the history's tokens
        where they were made ahead (`history_tokens_ahead`)."""
        if not self.shared_steps or torch.is_grad_enabled():
            return lambda noisy, sigma, end: self.velocity(noisy, sigma, gbuffer_latent, prompt, history, end)
        steps = ChunkSteps(self.transformer, gbuffer_latent.to(self.device), prompt.to(self.device), history, tokens)
        return lambda noisy, sigma, end: steps(noisy, self._timestep(noisy, sigma, end)).float()

    def history_tokens_ahead(self, history: HistoryInputs) -> torch.Tensor | None:
        """The history's share of the next chunk's steps, made ahead (ChunkSteps takes it as `tokens`); None
        where the steps are not shared."""
        if not self.shared_steps:
            return None
        with torch.inference_mode():
            return history_tokens(self.transformer, history)

    def _timestep(self, noisy: torch.Tensor, sigma: float, jump_end: float | None) -> torch.Tensor:
        def full(value: float) -> torch.Tensor:
            return torch.full((noisy.shape[0],), value, device=self.device, dtype=torch.float32)

        return self.sampler.timestep_input(full(sigma), None if jump_end is None else full(jump_end))

    def denoise(self, noise: torch.Tensor, gbuffer_latent: torch.Tensor, prompt: torch.Tensor,
                history: HistoryInputs, start_step: int = 0,
                on_step: Callable[[int], None] | None = None,
                fresh_noise: Callable[[], torch.Tensor] | None = None,
                history_tokens: torch.Tensor | None = None) -> torch.Tensor:
        """Few-step sampling from `noise` (B, 16, t, h, w) float32; `start_step` > 0 continues a partly noised
        latent (history re-cache); `fresh_noise()` feeds a re-noising sampler; `history_tokens` as
        `chunk_velocity`'s `tokens`. Returns the clean latent, float32."""
        sigmas = self.sampler.sigmas().tolist()
        x = noise.to(self.device, torch.float32)
        velocity = self.chunk_velocity(gbuffer_latent, prompt, history, history_tokens)
        for i in range(start_step, self.sampler.num_steps):
            v = velocity(x, sigmas[i], self.sampler.jump_end(i))
            x = self.sampler.step(x, v, sigmas[i], sigmas[i + 1], fresh_noise)
            if on_step:
                on_step(i)
        return x

    def decode(self, latents: torch.Tensor, stream: StreamMemory, gbuffer: torch.Tensor | None = None,
               prompt: torch.Tensor | None = None) -> torch.Tensor:
        """latents (B, 16, t, h, w) → frames (B, 4t, 3, H, W) in [0, 1]. With `gbuffer` (the G-buffer frames
        (B, >= 4t, 5, 3, H, W) in [0, 1] the latents were drawn from, frame for frame) a guided decoder draws the
        picture from both, or the refiner, with `prompt` (B, L, D), adds the detail the latent lost; without
        `gbuffer` the TAEHV stack's frames."""
        frames = self.decoder(latents.to(self.dtype), stream)
        if gbuffer is not None and self.draws_from_gbuffer:
            frames = self.from_gbuffer(frames, gbuffer, prompt)
        return frames.float()

    @property
    def draws_from_gbuffer(self) -> bool:
        """Whether a stage after the TAEHV stack reads each frame's G-buffer: a guided decoder's guide (guide.py)
        or the refiner (refiner.py)."""
        return self.decoder.guide is not None or self.refiner is not None

    def from_gbuffer(self, frames: torch.Tensor, gbuffer: torch.Tensor, prompt: torch.Tensor | None) -> torch.Tensor:
        """The TAEHV stack's frames (B, T, 3, H, W) → the model's (B, T, 3, H, W), each from its own G-buffer frame
        (gbuffer (B, >= T, 5, 3, H, W) in [0, 1]); frame by frame independent, so a live session may finish a
        latent frame's frames one at a time and send each as soon as it is done."""
        if self.decoder.guide is not None:
            frames = self.decoder.guided(frames.to(self.dtype), gbuffer.to(self.device, self.dtype)).float()
        # both only in eval's no_transformer ablation (training/ablations.py), which fits a refiner after a guide
        return self.refine(frames, gbuffer, prompt) if self.refiner is not None else frames

    def decode_frames(self, latent: torch.Tensor, stream: StreamMemory) -> Iterator[torch.Tensor]:
        """One latent frame (B, 16, 1, h, w) → the decoder's frames (B, 1, 3, H, W) in [0, 1], float32, one by one
        as each is decoded (TinyDecoder.frames): what `decode` gives without a refiner, frame by frame."""
        for frame in self.decoder.frames(latent.to(self.dtype), stream):
            yield frame.float()

    def refine(self, frames: torch.Tensor, gbuffer: torch.Tensor, prompt: torch.Tensor | None) -> torch.Tensor:
        """Decoded frames (B, T, 3, H, W) → refined (B, T, 3, H, W), each from its own G-buffer frame (gbuffer
        (B, >= T, 5, 3, H, W) in [0, 1]) and the prompt (B, L, D); frame by frame independent, so a live session
        may refine a latent frame's frames one at a time and send each as soon as it is refined."""
        if self.refiner is None:
            raise RendererError(f"config {self.config.name} has no G-buffer refiner")
        if prompt is None:
            raise RendererError("the G-buffer refiner needs the chunk's prompt embedding")
        return self.refiner.refine_frames(frames.to(self.dtype), gbuffer.to(self.device, self.dtype),
                                          prompt.to(self.device, self.dtype)).float()
