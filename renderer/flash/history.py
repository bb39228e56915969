"""Three-level bounded history of clean latents and the appearance anchor, as the transformer takes them.

A history latent frame is 96 channels: the generated clean RGB latent (16) next to its G-buffer latent (80),
the same layout as the transformer's input. The buffer holds exactly long + mid + short latent frames
(Helios-style: zeros before anything was generated), so memory is constant over an unbounded rollout:

    buffer (1, 96, long + mid + short, h, w) = [ long (patch_long, 4x8x8) | mid (patch_mid, 2x4x4) | short ]
    short tokens = [anchor, short frames] at full resolution (patch_short, 1x2x2)

The anchor is the first generated latent frame, kept for the whole rollout (global appearance).
Rotary positions are relative to the chunk (as Helios): [anchor | long | mid | short | chunk] =
0, 1.., ..., so positions never grow either.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass
class HistoryInputs:
    """Keyword arguments of HeliosTransformer3DModel.forward for one chunk."""

    short: torch.Tensor
    mid: torch.Tensor
    long: torch.Tensor
    indices_short: torch.Tensor
    indices_mid: torch.Tensor
    indices_long: torch.Tensor
    indices_chunk: torch.Tensor

    def kwargs(self) -> dict:
        return dict(latents_history_short=self.short, latents_history_mid=self.mid,
                    latents_history_long=self.long, indices_latents_history_short=self.indices_short,
                    indices_latents_history_mid=self.indices_mid,
                    indices_latents_history_long=self.indices_long, indices_hidden_states=self.indices_chunk)


class LatentHistory:
    def __init__(self, sizes: tuple[int, int, int], channels: int, height: int, width: int,
                 device: torch.device, dtype: torch.dtype):
        self.sizes = tuple(sizes)                       # (long, mid, short) latent frames
        self.buffer = torch.zeros(1, channels, sum(self.sizes), height, width, device=device, dtype=dtype)
        self.anchor = torch.zeros(1, channels, 1, height, width, device=device, dtype=dtype)
        self.has_anchor = False
        self.version = 0                                # counts the changes: what was made from the history ages

    def push(self, rgb_latent: torch.Tensor, gbuffer_latent: torch.Tensor) -> None:
        """Append a chunk's clean latents (1, 16, t, h, w) and (1, 80, t, h, w); the oldest fall out."""
        frames = torch.cat([rgb_latent, gbuffer_latent], dim=1).to(self.buffer.dtype)
        if not self.has_anchor:
            self.anchor = frames[:, :, :1].clone()
            self.has_anchor = True
        total = self.buffer.shape[2]
        self.buffer = torch.cat([self.buffer, frames], dim=2)[:, :, -total:].contiguous()
        self.version += 1

    def replace_recent(self, rgb_latent: torch.Tensor) -> None:
        """Overwrite the RGB part of the newest frames (history re-cache under a new prompt)."""
        t = rgb_latent.shape[2]
        self.buffer[:, : rgb_latent.shape[1], -t:] = rgb_latent.to(self.buffer.dtype)
        self.version += 1

    def recent_rgb(self, frames: int) -> torch.Tensor:
        return self.buffer[:, :16, -frames:].float()

    def recent_gbuffer(self, frames: int) -> torch.Tensor:
        return self.buffer[:, 16:, -frames:]

    def inputs(self, chunk_latents: int) -> HistoryInputs:
        long_n, mid_n, short_n = self.sizes
        long, mid, short = self.buffer.split(list(self.sizes), dim=2)
        idx = torch.arange(1 + sum(self.sizes) + chunk_latents, device=self.buffer.device).unsqueeze(0)
        i_anchor, i_long, i_mid, i_short, i_chunk = idx.split([1, long_n, mid_n, short_n, chunk_latents], dim=1)
        return HistoryInputs(short=torch.cat([self.anchor, short], dim=2), mid=mid, long=long,
                             indices_short=torch.cat([i_anchor, i_short], dim=1), indices_mid=i_mid,
                             indices_long=i_long, indices_chunk=i_chunk)

    def tensors(self) -> dict[str, torch.Tensor]:
        """Everything the history keeps (for the bounded-memory check)."""
        return {"buffer": self.buffer, "anchor": self.anchor}
