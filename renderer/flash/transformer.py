"""The Flash transformer: diffusers' HeliosTransformer3DModel plus per-layer text-sink slots.

What the library already has and we reuse as is: the 96-channel patch embedding (16 noisy RGB latent + 5x16
G-buffer latent channels: the G-buffer patch embedding), the short/mid/long memory patchifiers
(`patch_short` (1,2,2), `patch_mid` (2,4,4), `patch_long` (4,8,8)), zero-timestep history tokens, the output
scale-shift table (`norm_out.scale_shift_table`) and cross-attention of the current chunk to the prompt.

What Flash adds: a text sink. Each block l gets `sink_slots` learned slots that are prepended to the prompt
tokens its cross-attention reads:
    sink_l = slots_l + proj_l(mean over tokens of the projected prompt)      (B, sink_slots, inner_dim)
The slots give every layer a few always-present, prompt-carrying keys, so the prompt keeps a steady grip over a
long rollout instead of being diluted among hundreds of padding tokens. They are attached with forward
pre-hooks so that the library's forward runs unchanged and the state-dict names stay those of the library.
"""

from __future__ import annotations

import torch
from torch import nn
from diffusers.models.transformers.transformer_helios import HeliosTransformer3DModel

from renderer.flash.config import FlashConfig


class TextSink(nn.Module):
    """Per-layer learned slots carrying the pooled prompt. slots: (layers, slots, dim)."""

    def __init__(self, num_layers: int, num_slots: int, dim: int):
        super().__init__()
        self.slots = nn.Parameter(torch.randn(num_layers, num_slots, dim) * dim ** -0.5)
        self.proj = nn.ModuleList(nn.Linear(dim, dim) for _ in range(num_layers))

    def tokens(self, layer: int, prompt: torch.Tensor) -> torch.Tensor:
        """prompt: projected prompt tokens (B, L, dim) → sink tokens (B, slots, dim)."""
        pooled = self.proj[layer](prompt.mean(dim=1, keepdim=True))
        return self.slots[layer].to(prompt.dtype).unsqueeze(0) + pooled

    def prepend_hook(self, layer: int):
        """A forward pre-hook for block `layer`: args = (hidden, prompt, temb, rope, context_length)."""
        def hook(_block, args):
            hidden, prompt, *rest = args
            return (hidden, torch.cat([self.tokens(layer, prompt), prompt], dim=1), *rest)
        return hook


class FlashTransformer(HeliosTransformer3DModel):
    """HeliosTransformer3DModel with `text_sink.*` parameters; config from a FlashConfig."""

    def __init__(self, config: FlashConfig):
        super().__init__(**config.transformer_kwargs())
        self.text_sink = TextSink(config.num_layers, config.sink_slots, config.inner_dim)
        for i, block in enumerate(self.blocks):
            block.register_forward_pre_hook(self.text_sink.prepend_hook(i))
