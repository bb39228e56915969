"""TAEHV's building blocks (madebyollin/taehv, taehv.py), shared by the tiny decoder and the G-buffer encoders.

Frames travel as (N*T, C, H, W), batch-major (all of sample 0's frames, then sample 1's). A MemBlock reads its
input at t and at t-1; within a chunk all times run in parallel, across chunks a StreamMemory keeps each
MemBlock's last input, so running a stream chunk by chunk equals running it whole (`run_stream`).
"""

from __future__ import annotations

from typing import Hashable

import torch
from torch import nn


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


class TPool(nn.Module):
    """`stride` consecutive frames → one: (N*T, C, H, W) → (N*T/stride, C, H, W)."""

    def __init__(self, n_f: int, stride: int):
        super().__init__()
        self.stride = stride
        self.conv = nn.Conv2d(n_f * stride, n_f, 1, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        _, c, h, w = x.shape
        return self.conv(x.reshape(-1, self.stride * c, h, w))


class TGrow(nn.Module):
    """One frame → `stride` frames: (N*T, C, H, W) → (N*T*stride, C, H, W)."""

    def __init__(self, n_f: int, stride: int):
        super().__init__()
        self.stride = stride
        self.conv = nn.Conv2d(n_f, n_f * stride, 1, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        _, c, h, w = x.shape
        return self.conv(x).reshape(-1, c, h, w)


class StreamMemory:
    """Last input frame of each MemBlock, (B, C, H, W) per (stream, block index); zeros before the first chunk."""

    def __init__(self):
        self.last: dict[Hashable, torch.Tensor] = {}

    def shifted(self, key: Hashable, x: torch.Tensor, batch: int) -> torch.Tensor:
        """x (B*T, C, H, W) → its inputs one step back in time (the block's `past`); remembers x's last frame."""
        seq = x.reshape(batch, -1, *x.shape[1:])
        first = self.last.get(key)
        if first is None:
            first = torch.zeros_like(seq[:, 0])
        self.last[key] = seq[:, -1].detach().clone()
        return torch.cat([first.unsqueeze(1), seq[:, :-1]], dim=1).reshape(x.shape)

    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in self.last.values())


def run_stream(blocks: nn.Sequential, x: torch.Tensor, batch: int, memory: StreamMemory,
               stream: Hashable = "") -> torch.Tensor:
    """Apply `blocks` to one chunk of a stream, (B*T, C, H, W) batch-major, MemBlocks fed from `memory`."""
    for i, block in enumerate(blocks):
        x = block(x, memory.shifted((stream, i), x, batch)) if isinstance(block, MemBlock) else block(x)
    return x


def init_signal_preserving(module: nn.Module) -> None:
    """He-normal convolutions and zero biases, so a randomly initialised codec passes its input through
    (PyTorch's default init shrinks the signal layer by layer until the output no longer depends on the input:
    useless for random-weight smoke runs and for the learning check)."""
    for m in module.modules():
        if isinstance(m, nn.Conv2d):
            nn.init.kaiming_normal_(m.weight, nonlinearity="relu")
            if m.bias is not None:
                nn.init.zeros_(m.bias)


def taehv_encoder(width: int = 64, latent_channels: int = 16, image_channels: int = 3,
                  time_downscale=(True, True, False)) -> nn.Sequential:
    """TAEHV's encoder: (N*T, 3, H, W) → (N*T/4, latent, H/8, W/8); indices as upstream (0 conv ... 17 conv)."""
    def stage(stride: int) -> list[nn.Module]:
        return [TPool(width, stride), conv(width, width, stride=2, bias=False),
                MemBlock(width, width), MemBlock(width, width), MemBlock(width, width)]

    return nn.Sequential(conv(image_channels, width), nn.ReLU(inplace=True),
                         *[m for down in time_downscale for m in stage(2 if down else 1)],
                         conv(width, latent_channels))
