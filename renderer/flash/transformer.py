"""The Flash transformer: diffusers' HeliosTransformer3DModel plus per-layer text-sink slots.

What the library already has and we reuse as is: the 96-channel patch embedding (16 noisy RGB latent + 5x16
G-buffer latent channels: the G-buffer patch embedding), the short/mid/long memory patchifiers
(`patch_short` (1,2,2), `patch_mid` (2,4,4), `patch_long` (4,8,8)), zero-timestep history tokens, the output
scale-shift table (`norm_out.scale_shift_table`) and cross-attention of the current chunk to the prompt. Every
HeliosTransformer3DModel argument of config.json reaches the library class (FlashConfig.transformer_kwargs).

What Flash adds: a text sink. Its mechanism and names are not public; ours (a guess, see docs/flash.md): each
block l gets `sink_slots` learned slots that are prepended to the prompt tokens its cross-attention reads:
    sink_l = slots_l + proj_l(mean over tokens of the projected prompt)      (B, sink_slots, inner_dim)
They are attached with forward pre-hooks, so the library's forward runs unchanged and the state-dict names stay
those of the library. A checkpoint's sink is matched against SINK families (families.py); when none fits, the
model runs without a sink (`text_sink_status` = "unused").
"""

from __future__ import annotations

import torch
from torch import nn
from diffusers.models.transformers.transformer_helios import HeliosTransformer3DModel

from renderer.flash.config import FlashConfig
from renderer.flash.families import Family, Shapes

SINK_PREFIX = "text_sink."


def is_sink_key(key: str) -> bool:
    """Any key that names a sink, in our spelling or another (text_sink.*, blocks.3.sink_tokens, ...)."""
    return "sink" in key


class TextSink(nn.Module):
    """Per-layer learned slots carrying the pooled prompt. slots: (layers, slots, dim); proj optional."""

    def __init__(self, num_layers: int, num_slots: int, dim: int, pooled: bool = True):
        super().__init__()
        self.slots = nn.Parameter(torch.randn(num_layers, num_slots, dim) * dim ** -0.5)
        self.proj = nn.ModuleList(nn.Linear(dim, dim) for _ in range(num_layers)) if pooled else None

    def tokens(self, layer: int, prompt: torch.Tensor) -> torch.Tensor:
        """prompt: projected prompt tokens (B, L, dim) → sink tokens (B, slots, dim)."""
        slots = self.slots[layer].to(prompt.dtype).unsqueeze(0).expand(prompt.shape[0], -1, -1)
        if self.proj is None:
            return slots
        return slots + self.proj[layer](prompt.mean(dim=1, keepdim=True))

    def prepend_hook(self, layer: int):
        """A forward pre-hook for block `layer`: args = (hidden, prompt, temb, rope, context_length)."""
        def hook(_block, args):
            hidden, prompt, *rest = args
            return (hidden, torch.cat([self.tokens(layer, prompt), prompt], dim=1), *rest)
        return hook


def sink_families(config: FlashConfig) -> tuple[Family, ...]:
    """Sink layouts we can run; each must fit this model's layers and width."""
    layers, dim = config.num_layers, config.inner_dim

    def slots_of(shapes: Shapes) -> int | None:
        s = shapes.get("slots")                  # keys relative to SINK_PREFIX
        return s[1] if s is not None and len(s) == 3 and (s[0], s[2]) == (layers, dim) else None

    def build(pooled: bool):
        def make(shapes: Shapes):
            n = slots_of(shapes)
            return TextSink(layers, n, dim, pooled) if n else None
        return make

    return (Family("slots+proj", "text_sink.slots (layers, slots, dim) + text_sink.proj.L.{weight,bias}", build(True)),
            Family("slots", "text_sink.slots (layers, slots, dim)", build(False)))


class FlashTransformer(HeliosTransformer3DModel):
    """HeliosTransformer3DModel (every config key passed through) with an optional `text_sink`."""

    def __init__(self, config: FlashConfig, sink: TextSink | None | str = "new"):
        super().__init__(**config.transformer_kwargs())
        if sink == "new":
            sink = TextSink(config.num_layers, config.sink_slots, config.inner_dim)
        self.text_sink = sink
        if sink is not None:
            for i, block in enumerate(self.blocks):
                block.register_forward_pre_hook(sink.prepend_hook(i))

    @property
    def text_sink_status(self) -> str:
        return "used" if self.text_sink is not None else "unused"
