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

Mean flow (config `interval_embedding`, only for weights trained with `--objective meanflow`): a second timestep
embedding for the interval t - r beside Helios's one for t, so the model predicts the average velocity over [r, t].
The timestep argument is then (B, 2) = 1000 * (t, t - r); the official layout (one embedding) is unchanged.
"""

from __future__ import annotations

import torch
from torch import nn
from diffusers.models.embeddings import TimestepEmbedding
from diffusers.models.transformers.transformer_helios import HeliosTimeTextEmbedding, HeliosTransformer3DModel

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


class IntervalTimeTextEmbedding(HeliosTimeTextEmbedding):
    """Helios's time and text embedding plus `interval_embedder` for t - r, added to t's embedding before the
    modulation projection. Its last layer starts at zero, so a model that gains it computes what it did before.
    timestep: (B,) = t (interval 0: Helios's clean history tokens) or (B, 2) = (t, t - r), both x1000."""

    def __init__(self, dim: int, time_freq_dim: int, time_proj_dim: int, text_embed_dim: int):
        super().__init__(dim, time_freq_dim, time_proj_dim, text_embed_dim)
        self.interval_embedder = TimestepEmbedding(in_channels=time_freq_dim, time_embed_dim=dim)
        nn.init.zeros_(self.interval_embedder.linear_2.weight)
        nn.init.zeros_(self.interval_embedder.linear_2.bias)

    def forward(self, timestep: torch.Tensor, encoder_hidden_states: torch.Tensor | None = None,
                is_return_encoder_hidden_states: bool = True):
        t, interval = timestep.unbind(-1) if timestep.ndim == 2 else (timestep, torch.zeros_like(timestep))
        dtype = self.time_embedder.linear_1.weight.dtype
        temb = (self.time_embedder(self.timesteps_proj(t).to(dtype))
                + self.interval_embedder(self.timesteps_proj(interval).to(dtype))).type_as(encoder_hidden_states)
        timestep_proj = self.time_proj(self.act_fn(temb))
        if encoder_hidden_states is not None and is_return_encoder_hidden_states:
            encoder_hidden_states = self.text_embedder(encoder_hidden_states)
        return temb, timestep_proj, encoder_hidden_states


class FlashTransformer(HeliosTransformer3DModel):
    """HeliosTransformer3DModel (every config key passed through) with an optional `text_sink` and, for mean flow,
    an interval embedding."""

    _keep_in_fp32_modules = [*HeliosTransformer3DModel._keep_in_fp32_modules, "interval_embedder"]

    def __init__(self, config: FlashConfig, sink: TextSink | None | str = "new"):
        super().__init__(**config.transformer_kwargs())
        if config.interval_embedding:
            self.add_interval_embedding()
        if isinstance(sink, str):         # "new": a fresh sink of this config's shape
            sink = TextSink(config.num_layers, config.sink_slots, config.inner_dim)
        self.text_sink = sink
        if sink is not None:
            for i, block in enumerate(self.blocks):
                block.register_forward_pre_hook(sink.prepend_hook(i))

    @property
    def text_sink_status(self) -> str:
        return "used" if self.text_sink is not None else "unused"

    @property
    def has_interval_embedding(self) -> bool:
        return isinstance(self.condition_embedder, IntervalTimeTextEmbedding)

    def add_interval_embedding(self) -> None:
        """Give this model the (zero-initialised) interval embedding: from scratch, or a fine-tune of weights that
        lack it (`train --objective meanflow --weights DIR`). Existing parameters are kept, not copied."""
        if self.has_interval_embedding:
            return
        old = self.condition_embedder
        param = old.time_embedder.linear_1.weight
        with torch.device(param.device):
            new = IntervalTimeTextEmbedding(old.time_embedder.linear_1.out_features, old.timesteps_proj.num_channels,
                                            old.time_proj.out_features, old.text_embedder.linear_1.in_features)
        new.interval_embedder.to(param.dtype)
        new.load_state_dict(old.state_dict(), strict=False, assign=True)
        self.condition_embedder = new
