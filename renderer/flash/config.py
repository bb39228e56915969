"""Model configurations: `full` (the official AlayaRenderer-Flash sizes) and `tiny` (CPU tests). One code path.

Shapes used throughout (B batch, T frames, t latent frames = T / 4, H x W pixels, h x w = H/8 x W/8 latents):
  G-buffer frames  (B, T, 5, 3, H, W) in [0, 1]  →  G-buffer latent (B, 80, t, h, w)
  RGB latent       (B, 16, t, h, w)              →  RGB frames (B, T, 3, H, W) in [0, 1]
  transformer input = cat(noisy RGB latent, G-buffer latent) = 96 channels.

A FlashConfig is a pydantic dataclass: `dataclasses.replace` and keyword construction work as for a plain
dataclass, and `FlashConfig.from_json` validates through `alaya_errors.validate` (one-line errors naming the field).
"""

from __future__ import annotations

import dataclasses
from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Field, TypeAdapter
from pydantic.dataclasses import dataclass

from alaya_errors import validate
from renderer.base import RendererError

LATENT_CHANNELS = 16       # Wan 2.1 / TAEW2.1 latent channels
GBUFFER_CHANNELS = 5       # albedo, depth, metallic, normal, roughness (gbuffer.frame.CHANNELS)
SPATIAL_SCALE = 8          # pixels per latent cell, each axis
PATCH_MULTIPLE = 16        # sides are multiples of this: 8x codec times the (1, 2, 2) patch (renderer.FLASH.size)
TEMPORAL_SCALE = 4         # frames per latent frame

# HeliosTransformer3DModel arguments that FlashConfig names (the shapes our code needs); every other argument of
# that class travels untouched in `helios` (config passthrough), with Flash's values where config.json is silent.
HELIOS_SHAPE_ARGS = ("num_layers", "num_attention_heads", "attention_head_dim", "ffn_dim", "text_dim", "freq_dim",
                     "rope_dim", "patch_size")
FLASH_HELIOS_DEFAULTS = {"cross_attn_norm": True, "qk_norm": "rms_norm_across_heads", "eps": 1e-6,
                         "guidance_cross_attn": True, "zero_history_timestep": True,
                         "has_multi_term_memory_patch": True}

Positive = Annotated[int, Field(ge=1)]
SamplerUpdate = Literal["euler", "renoise"]
InputRange = Literal["0..1", "-1..1"]
TextEncoder = Literal["umt5", "minilm"]


@dataclass(frozen=True, config=ConfigDict(extra="forbid"))
class FlashConfig:
    name: str
    # transformer (diffusers HeliosTransformer3DModel arguments)
    num_layers: Positive
    num_attention_heads: Positive
    attention_head_dim: Positive
    ffn_dim: Positive
    text_dim: Positive                 # umT5 hidden size (4096 for umT5-XXL)
    freq_dim: Positive
    rope_dim: tuple[int, int, int]     # (t, y, x) rotary split of one head; sums to attention_head_dim
    patch_size: tuple[int, int, int] = (1, 2, 2)
    helios: dict[str, Any] = Field(default_factory=dict)   # any other Helios argument (rope_theta, qk_norm, ...)
    # text: prompt embeddings are padded / cut to text_len tokens; sink_slots learned slots per layer
    text_len: int = Field(default=512, ge=1)
    sink_slots: int = Field(default=4, ge=1)
    # what embeds a prompt outside the cache: "umt5" (Wan's umT5, given as a local directory; without one the
    # cache alone, e.g. random embeddings) or "minilm" (the bundled sentence encoder projected to text_dim, with
    # text_projection.safetensors beside the weights: small configs trained with `train`). Weights saved before
    # the option have no such key and load as "umt5", as they were.
    text_encoder: TextEncoder = "umt5"
    # codecs (random init; a checkpoint's own shapes decide when loading)
    gbuffer_hidden: int = Field(default=128, ge=1)                  # per branch of the grouped G-buffer encoder
    gbuffer_input_range: InputRange = "0..1"                        # what the G-buffer encoder was trained on
    gbuffer_stem_stride: Literal[1, 2] = 1                          # 2: first conv steps (cheap to train on a CPU)
    decoder_channels: tuple[int, int, int, int] = (256, 128, 64, 64)   # TAEHV decoder widths
    trim_startup_frames: bool = False  # TAEHV alignment: latent j → frames 4j-3..4j, first 3 decoded dropped
    # G-buffer refiner after the decoder (renderer/flash/refiner.py; small configs, `train --refiner`): the looks
    # (styles) it routes among, 0 = none (the official layout, `full`); its context branch's width
    refiner_looks: int = Field(default=0, ge=0)
    refiner_hidden: int = Field(default=16, ge=1)
    # a guided decoder's G-buffer guide (renderer/flash/guide.py; `train codec --guide`): its width, 0 = none; read
    # from the decoder file's shapes when weights load, as the decoder's widths are
    guide_width: int = Field(default=0, ge=0)
    # streaming: latent frames per chunk and history sizes (long, mid, short) in latent frames
    chunk_latents: int = Field(default=4, ge=1)
    history_sizes: tuple[int, int, int] = (16, 2, 1)
    # few-step sampling: sigma_max (first noise level), shift, update rule, steps
    num_steps: int = Field(default=4, ge=1)
    timestep_shift: float = Field(default=5.0, gt=0)
    sigma_max: float = Field(default=1.0, gt=0, le=1)
    sampler_update: SamplerUpdate = "euler"
    # mean flow (training/objective.py): a second timestep embedding for the interval t - r, zero-initialised, so
    # the transformer predicts the average velocity over [r, t]; the sampler's steps become jumps. Off for the
    # official checkpoint (one timestep embedding); on only for weights trained with `--objective meanflow`.
    interval_embedding: bool = False

    @property
    def in_channels(self) -> int:
        return LATENT_CHANNELS + GBUFFER_CHANNELS * LATENT_CHANNELS

    @property
    def inner_dim(self) -> int:
        return self.num_attention_heads * self.attention_head_dim

    @property
    def chunk_frames(self) -> int:
        return self.chunk_latents * TEMPORAL_SCALE

    def transformer_kwargs(self) -> dict:
        """Arguments of diffusers' HeliosTransformer3DModel (what transformer/config.json holds)."""
        shape = {k: getattr(self, k) for k in HELIOS_SHAPE_ARGS}
        return {**FLASH_HELIOS_DEFAULTS, **self.helios, **shape, "in_channels": self.in_channels,
                "out_channels": LATENT_CHANNELS}

    def to_json(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: dict, where: str = "config") -> "FlashConfig":
        """Fields missing from `data` come from the named preset (`full` when unnamed)."""
        if not isinstance(data, dict):
            raise RendererError("expected a JSON object", where)
        base = CONFIGS.get(data.get("name", ""), FULL)
        return validate(_ADAPTER, {**base.to_json(), **data}, RendererError, where)


# Wan 2.1 1.3B dimensions: 30 layers, 12 heads x 128 (1536), ffn 8960, umT5-XXL text (4096).
FULL = FlashConfig(name="full", num_layers=30, num_attention_heads=12, attention_head_dim=128, ffn_dim=8960,
                   text_dim=4096, freq_dim=256, rope_dim=(44, 42, 42))

# A few layers and small widths (but wider than one output patch, 16 x 2 x 2 = 64 values): CPU-fast.
TINY = FlashConfig(name="tiny", num_layers=2, num_attention_heads=4, attention_head_dim=32, ffn_dim=256,
                   text_dim=32, freq_dim=32, rope_dim=(12, 10, 10), text_len=8, sink_slots=2, gbuffer_hidden=8,
                   decoder_channels=(32, 16, 8, 8), chunk_latents=2, history_sizes=(4, 2, 1))

# Sized to train from scratch on a CPU in well under an hour at 160x96 (alaya-studio train; docs/training.md):
# four layers of 128 wide, a 16-per-branch G-buffer encoder and a TAEHV decoder a quarter of TAEW2.1's width.
# The G-buffer encoder's stem steps 2x: at full resolution its convolutions and temporal pooling were most of a
# training step on a CPU (1579 ms a step before, 698 ms after: bench/train_step_bench.py, BENCHMARKS.md).
NANO = FlashConfig(name="nano", num_layers=4, num_attention_heads=4, attention_head_dim=32, ffn_dim=384,
                   text_dim=32, freq_dim=64, rope_dim=(12, 10, 10), text_len=8, sink_slots=2, gbuffer_hidden=16,
                   gbuffer_stem_stride=2,
                   decoder_channels=(64, 32, 16, 16), chunk_latents=2, history_sizes=(4, 2, 1))

CONFIGS = {c.name: c for c in (FULL, TINY, NANO)}
_ADAPTER = TypeAdapter(FlashConfig)


def get_config(name: str) -> FlashConfig:
    try:
        return CONFIGS[name]
    except KeyError:
        raise RendererError(f"unknown flash config {name!r}; choose one of {', '.join(CONFIGS)}",
                            "--config") from None
