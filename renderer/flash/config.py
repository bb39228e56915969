"""Model configurations: `full` (the official AlayaRenderer-Flash sizes) and `tiny` (CPU tests). One code path.

Shapes used throughout (B batch, T frames, t latent frames = T / 4, H x W pixels, h x w = H/8 x W/8 latents):
  G-buffer frames  (B, T, 5, 3, H, W) in [0, 1]  →  G-buffer latent (B, 80, t, h, w)
  RGB latent       (B, 16, t, h, w)              →  RGB frames (B, T, 3, H, W) in [0, 1]
  transformer input = cat(noisy RGB latent, G-buffer latent) = 96 channels.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from renderer.base import RendererError

LATENT_CHANNELS = 16       # Wan 2.1 / TAEW2.1 latent channels
GBUFFER_CHANNELS = 5       # albedo, depth, metallic, normal, roughness (gbuffer.frame.CHANNELS)
SPATIAL_SCALE = 8          # pixels per latent cell, each axis
TEMPORAL_SCALE = 4         # frames per latent frame
PATCH_MULTIPLE = 16        # frame sides must be multiples of this: 8x codec times the (1, 2, 2) patch


@dataclass(frozen=True)
class FlashConfig:
    name: str
    # transformer (diffusers HeliosTransformer3DModel arguments)
    num_layers: int
    num_attention_heads: int
    attention_head_dim: int
    ffn_dim: int
    text_dim: int                      # umT5 hidden size (4096 for umT5-XXL)
    freq_dim: int
    rope_dim: tuple[int, int, int]     # (t, y, x) rotary split of one head; sums to attention_head_dim
    patch_size: tuple[int, int, int] = (1, 2, 2)
    # text: prompt embeddings are padded / cut to text_len tokens; sink_slots learned slots per layer
    text_len: int = 512
    sink_slots: int = 4
    # codecs
    gbuffer_hidden: int = 128                          # per branch of the grouped G-buffer encoder
    decoder_channels: tuple[int, int, int, int] = (256, 128, 64, 64)   # TAEHV decoder widths
    # streaming: latent frames per chunk and history sizes (long, mid, short) in latent frames
    chunk_latents: int = 4
    history_sizes: tuple[int, int, int] = (16, 2, 1)
    # few-step sampling
    num_steps: int = 4
    timestep_shift: float = 5.0

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
        return dict(patch_size=self.patch_size, num_attention_heads=self.num_attention_heads,
                    attention_head_dim=self.attention_head_dim, in_channels=self.in_channels,
                    out_channels=LATENT_CHANNELS, text_dim=self.text_dim, freq_dim=self.freq_dim,
                    ffn_dim=self.ffn_dim, num_layers=self.num_layers, rope_dim=self.rope_dim,
                    cross_attn_norm=True, qk_norm="rms_norm_across_heads", eps=1e-6,
                    guidance_cross_attn=True, zero_history_timestep=True, has_multi_term_memory_patch=True)

    def to_json(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: dict, where: str = "config") -> "FlashConfig":
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise RendererError(f"unknown config field(s) {', '.join(unknown)}", where)
        values = {k: tuple(v) if isinstance(v, list) else v for k, v in data.items()}
        base = CONFIGS.get(values.get("name", ""), FULL)
        return dataclasses.replace(base, **values)


# Wan 2.1 1.3B dimensions: 30 layers, 12 heads x 128 (1536), ffn 8960, umT5-XXL text (4096).
FULL = FlashConfig(name="full", num_layers=30, num_attention_heads=12, attention_head_dim=128, ffn_dim=8960,
                   text_dim=4096, freq_dim=256, rope_dim=(44, 42, 42))

# A few layers and small widths (but wider than one output patch, 16 x 2 x 2 = 64 values): CPU-fast.
TINY = FlashConfig(name="tiny", num_layers=2, num_attention_heads=4, attention_head_dim=32, ffn_dim=256,
                   text_dim=32, freq_dim=32, rope_dim=(12, 10, 10), text_len=8, sink_slots=2, gbuffer_hidden=8,
                   decoder_channels=(32, 16, 8, 8), chunk_latents=2, history_sizes=(4, 2, 1))

# Sized to train from scratch on a CPU in well under an hour at 160x96 (alaya-studio train; docs/training.md):
# four layers of 128 wide, a 16-per-branch G-buffer encoder and a TAEHV decoder a quarter of TAEW2.1's width.
NANO = FlashConfig(name="nano", num_layers=4, num_attention_heads=4, attention_head_dim=32, ffn_dim=384,
                   text_dim=32, freq_dim=64, rope_dim=(12, 10, 10), text_len=8, sink_slots=2, gbuffer_hidden=16,
                   decoder_channels=(64, 32, 16, 16), chunk_latents=2, history_sizes=(4, 2, 1))

CONFIGS = {c.name: c for c in (FULL, TINY, NANO)}


def get_config(name: str) -> FlashConfig:
    try:
        return CONFIGS[name]
    except KeyError:
        raise RendererError(f"unknown flash config {name!r}; choose one of {', '.join(CONFIGS)}",
                            "--config") from None
