"""The stateful streaming tiny decoder: TAEHV architecture (madebyollin/taehv), TAEW2.1 sizes.

Module structure and indices match TAEHV's `decoder` nn.Sequential, so `taew2_1_ft.safetensors`
(`decoder.1.weight`, `decoder.3.conv.0.weight`, `decoder.7.conv.weight`, ...) loads by name:

  0 Clamp  1 conv  2 ReLU | 3-5 MemBlock  6 Upsample  7 TGrow(1)  8 conv | 9-11 MemBlock  12 Upsample
  13 TGrow(2)  14 conv | 15-17 MemBlock  18 Upsample  19 TGrow(2)  20 conv | 21 ReLU  22 conv

Streaming: a MemBlock reads, besides its input at time t, its input at t-1. Within a chunk all times run in
parallel; across chunks each MemBlock keeps its last input (`memory`), so decoding chunk by chunk gives exactly
what decoding the whole stream at once gives. Latent frame j decodes to frames 4j..4j+3 (no start-up trim: the
session aligns latents with the G-buffer encoder's 4-frame groups).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from renderer.flash.config import LATENT_CHANNELS
from renderer.flash.gbuffer_encoder import init_signal_preserving


def conv(n_in: int, n_out: int, **kwargs) -> nn.Conv2d:
    return nn.Conv2d(n_in, n_out, 3, padding=1, **kwargs)


class Clamp(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(x / 3) * 3


class MemBlock(nn.Module):
    def __init__(self, n_in: int, n_out: int):
        super().__init__()
        self.conv = nn.Sequential(conv(n_in * 2, n_out), nn.ReLU(inplace=True), conv(n_out, n_out),
                                  nn.ReLU(inplace=True), conv(n_out, n_out))
        self.skip = nn.Conv2d(n_in, n_out, 1, bias=False) if n_in != n_out else nn.Identity()
        self.act = nn.ReLU(inplace=True)

    def forward(self, x: torch.Tensor, past: torch.Tensor) -> torch.Tensor:
        return self.act(self.conv(torch.cat([x, past], 1)) + self.skip(x))


class TGrow(nn.Module):
    """One frame → `stride` frames: (N*T, C, H, W) → (N*T*stride, C, H, W)."""

    def __init__(self, n_f: int, stride: int):
        super().__init__()
        self.stride = stride
        self.conv = nn.Conv2d(n_f, n_f * stride, 1, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        _, c, h, w = x.shape
        return self.conv(x).reshape(-1, c, h, w)


def taehv_decoder(n_f=(256, 128, 64, 64), latent_channels: int = LATENT_CHANNELS) -> nn.Sequential:
    return nn.Sequential(
        Clamp(), conv(latent_channels, n_f[0]), nn.ReLU(inplace=True),
        MemBlock(n_f[0], n_f[0]), MemBlock(n_f[0], n_f[0]), MemBlock(n_f[0], n_f[0]),
        nn.Upsample(scale_factor=2), TGrow(n_f[0], 1), conv(n_f[0], n_f[1], bias=False),
        MemBlock(n_f[1], n_f[1]), MemBlock(n_f[1], n_f[1]), MemBlock(n_f[1], n_f[1]),
        nn.Upsample(scale_factor=2), TGrow(n_f[1], 2), conv(n_f[1], n_f[2], bias=False),
        MemBlock(n_f[2], n_f[2]), MemBlock(n_f[2], n_f[2]), MemBlock(n_f[2], n_f[2]),
        nn.Upsample(scale_factor=2), TGrow(n_f[2], 2), conv(n_f[2], n_f[3], bias=False),
        nn.ReLU(inplace=True), conv(n_f[3], 3),
    )


class TinyDecoder(nn.Module):
    """State-dict names `decoder.N...` as in TAEHV. Stateless itself: the caller owns a DecoderMemory."""

    def __init__(self, channels=(256, 128, 64, 64)):
        super().__init__()
        self.decoder = taehv_decoder(channels)
        init_signal_preserving(self)

    def forward(self, latents: torch.Tensor, memory: "DecoderMemory") -> torch.Tensor:
        """latents (B, 16, t, h, w) → frames (B, 4t, 3, 8h, 8w) in [0, 1]; updates `memory` in place."""
        b, c, t, h, w = latents.shape
        x = latents.transpose(1, 2).reshape(b * t, c, h, w)
        for i, block in enumerate(self.decoder):
            if isinstance(block, MemBlock):
                x = block(x, memory.shifted(i, x, b))
            else:
                x = block(x)
        x = x.clamp(0, 1)
        return x.reshape(b, -1, *x.shape[1:])


class DecoderMemory:
    """Last input frame of each MemBlock, (B, C, H, W) per block index; zeros before the first chunk."""

    def __init__(self):
        self.last: dict[int, torch.Tensor] = {}

    def shifted(self, index: int, x: torch.Tensor, batch: int) -> torch.Tensor:
        """x (B*T, C, H, W) → its inputs one step back in time (the block's `past`); remembers x's last frame."""
        seq = x.reshape(batch, -1, *x.shape[1:])
        first = self.last.get(index)
        if first is None:
            first = torch.zeros_like(seq[:, 0])
        self.last[index] = seq[:, -1].detach().clone()
        return torch.cat([first.unsqueeze(1), seq[:, :-1]], dim=1).reshape(x.shape)

    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in self.last.values())


def fit_tgrow_weights(state: dict, decoder: nn.Sequential, prefix: str = "decoder.") -> dict:
    """TAEHV checkpoints may hold a wider TGrow than the decoder uses (e.g. stride 2 where we grow by 1); as
    TAEHV does, keep the last-timestep output channels. Other shape mismatches are left for the loader."""
    for i, block in enumerate(decoder):
        key = f"{prefix}{i}.conv.weight"
        if isinstance(block, TGrow) and key in state:
            want = block.conv.weight.shape[0]
            if state[key].shape[0] > want and state[key].shape[0] % want == 0:
                state = {**state, key: state[key][-want:]}
    return state
