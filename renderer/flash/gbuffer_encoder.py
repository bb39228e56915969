"""The grouped tiny G-buffer encoder: five G-buffer channels → 5x16 latent channels in one pass.

Five branches (albedo, depth, metallic, normal, roughness), each `hidden` wide, run side by side as grouped
convolutions, so one forward encodes all channels but no branch sees another. 8x spatial (three stride-2
convs) and 4x temporal (two TPools over aligned frame pairs) compression; no memory across chunks, so latent
frame j depends on exactly frames 4j..4j+3.

    (N*T, 5*3, H, W) → (N*T/4, 5*16, H/8, W/8); output channels grouped by branch (albedo first).
"""

from __future__ import annotations

import torch
from torch import nn

from renderer.flash.config import GBUFFER_CHANNELS, LATENT_CHANNELS, TEMPORAL_SCALE

G = GBUFFER_CHANNELS


def gconv(n_in: int, n_out: int, stride: int = 1, bias: bool = True) -> nn.Conv2d:
    return nn.Conv2d(n_in, n_out, 3, stride=stride, padding=1, groups=G, bias=bias)


class GroupedTPool(nn.Module):
    """Merge `stride` consecutive frames per branch: (N*T, C, H, W) → (N*T/stride, C, H, W)."""

    def __init__(self, n_f: int, stride: int):
        super().__init__()
        self.stride = stride
        self.conv = nn.Conv2d(n_f * stride, n_f, 1, groups=G, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        nt, c, h, w = x.shape
        # (N*T/s, s, G, C/G) → (N*T/s, G, s, C/G): each branch's frames side by side for its own group
        x = x.reshape(nt // self.stride, self.stride, G, c // G, h, w).transpose(1, 2)
        return self.conv(x.reshape(nt // self.stride, self.stride * c, h, w))


class GroupedResBlock(nn.Module):
    def __init__(self, n_f: int):
        super().__init__()
        self.conv = nn.Sequential(gconv(n_f, n_f), nn.ReLU(inplace=True), gconv(n_f, n_f))
        self.act = nn.ReLU(inplace=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.act(self.conv(x) + x)


def init_signal_preserving(module: nn.Module) -> None:
    """He-normal convolutions and zero biases, so a randomly initialised codec passes its input through
    (PyTorch's default init shrinks the signal layer by layer until the output no longer depends on the input:
    useless for random-weight smoke runs and for the learning check)."""
    for m in module.modules():
        if isinstance(m, nn.Conv2d):
            nn.init.kaiming_normal_(m.weight, nonlinearity="relu")
            if m.bias is not None:
                nn.init.zeros_(m.bias)


class GBufferEncoder(nn.Module):
    def __init__(self, hidden: int = 128):
        super().__init__()
        n_f = G * hidden
        self.encoder = nn.Sequential(
            gconv(G * 3, n_f), nn.ReLU(inplace=True),
            GroupedTPool(n_f, 2), gconv(n_f, n_f, stride=2, bias=False), GroupedResBlock(n_f),   # T/2, H/2
            GroupedTPool(n_f, 2), gconv(n_f, n_f, stride=2, bias=False), GroupedResBlock(n_f),   # T/4, H/4
            gconv(n_f, n_f, stride=2, bias=False), GroupedResBlock(n_f),                           # T/4, H/8
            gconv(n_f, G * LATENT_CHANNELS),
        )
        init_signal_preserving(self)

    def forward(self, frames: torch.Tensor) -> torch.Tensor:
        """frames (B, T, 5, 3, H, W) in [0, 1], T a multiple of 4 → latent (B, 80, T/4, H/8, W/8)."""
        b, t, g, c, h, w = frames.shape
        assert g == G and t % TEMPORAL_SCALE == 0, frames.shape
        z = self.encoder(frames.reshape(b * t, g * c, h, w))
        return z.reshape(b, t // TEMPORAL_SCALE, *z.shape[1:]).transpose(1, 2)
