"""`baselines.conv`: a small fully convolutional G-buffer → RGB network, the strongest simple method for what a
pixel's neighbourhood decides (a shadow's edge, a glow, fog over a distance), as `per_pixel` is for what a pixel
decides alone.

    input     the 15 G-buffer values of each pixel in [0, 1] (5 channels x RGB) and their box means over 5, 13 and
              33 px squares (zero padding, each mean over the pixels inside the frame): 60 channels
    trunk     conv1x1(60 → 32) ReLU, conv3x3(32 → 32) ReLU
    heads     per style: conv1x1(32 → 3) of the trunk, plus a linear map of the box means (conv1x1(45 → 3)),
              plus the quadratic map of the pixel's own 15 values (1, v_i, v_i v_j: the per-pixel baseline's
              features, training/baselines.py)
    receptive field   33 + (3 - 1) = 35 px: the widest box, widened by one pixel on each side by the 3x3 conv
                      (the 1x1 layers add nothing); `receptive_field` measures it by a gradient probe

Fitted on the training recordings' frames (`CONV_FRAMES` per recording, evenly spaced, every target style), never
on a test recording (eval's fit checks), in two stages: the quadratic and box-mean terms together by least squares
(the per-pixel baseline's fit with the neighbourhood means among its features, so the network starts at least
where `per_pixel` ends), then the trunk and its head by Adam on the residual for a stated wall-clock budget
(`eval --conv-minutes`, default 10).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from renderer.flash.refiner import quadratic_features
from training.baselines import FEATURES, GBUFFER_VALUES, RIDGE

BOXES = (5, 13, 33)                  # box mean widths (px): near, middle, far neighbourhood
RECEPTIVE_FIELD = max(BOXES) + 2     # + the 3x3 conv
HIDDEN = 32
CONV_FRAMES = 48                     # frames per training recording (evenly spaced)
BATCH = 4
LR = 2e-3
LSQ_PIXELS = 2000                    # random pixels per frame in the least-squares stage


def box_mean(x: torch.Tensor, k: int) -> torch.Tensor:
    """(N, C, H, W) → the mean over each pixel's k x k square (k odd) of the pixels inside the frame, by an
    integral image: the same cost for any k, and differentiable."""
    r = k // 2

    def window_sums(t: torch.Tensor) -> torch.Tensor:
        s = F.pad(t, (r + 1, r, r + 1, r)).cumsum(2).cumsum(3)     # one leading zero row and column
        return s[..., k:, k:] - s[..., :-k, k:] - s[..., k:, :-k] + s[..., :-k, :-k]

    return window_sums(x) / window_sums(torch.ones_like(x[:1, :1]))


def gbuffer_input(gbuffer: np.ndarray | torch.Tensor) -> torch.Tensor:
    """uint8 frames (N, 5, H, W, 3) (the frame layout) → float (N, 15, H, W) in [0, 1], training/baselines.py's
    value order (channel-major, RGB within a channel)."""
    g = torch.as_tensor(gbuffer)
    return g.permute(0, 1, 4, 2, 3).flatten(1, 2).float() / 255.0


def box_means(g: torch.Tensor) -> torch.Tensor:
    """(N, 15, H, W) → (N, 45, H, W): the box means over every width in BOXES."""
    return torch.cat([box_mean(g, k) for k in BOXES], dim=1)


class ConvBaseline(nn.Module):
    quadratic: torch.Tensor                  # a buffer (register_buffer below): fitted by least squares, not trained

    def __init__(self, styles: list[str], hidden: int = HIDDEN):
        super().__init__()
        self.styles = list(styles)
        s, boxes = len(self.styles), GBUFFER_VALUES * len(BOXES)
        self.register_buffer("quadratic", torch.zeros(s, FEATURES, 3))     # the pixel's own values (S, 136, 3)
        self.linear = nn.Conv2d(boxes, 3 * s, 1, bias=False)              # the box means
        self.mix = nn.Conv2d(GBUFFER_VALUES + boxes, hidden, 1)
        self.context = nn.Conv2d(hidden, hidden, 3, padding=1)
        self.heads = nn.Conv2d(hidden, 3 * s, 1)
        for w in (self.linear.weight, self.heads.weight, self.heads.bias):
            if w is not None:
                nn.init.zeros_(w)

    def forward(self, g: torch.Tensor) -> torch.Tensor:
        """(N, 15, H, W) in [0, 1] → (N, S, 3, H, W), each style's colour in [0, 1] (unclamped)."""
        base = torch.einsum("nfhw,sfc->nschw", quadratic_features(g, dim=1), self.quadratic.to(g.dtype))
        means = box_means(g)
        h = F.relu(self.context(F.relu(self.mix(torch.cat([g, means], dim=1)))))
        return base + (self.heads(h) + self.linear(means)).unflatten(1, (len(self.styles), 3))

    @torch.no_grad()
    def fit_least_squares(self, frames: "ConvFrames", seed: int = 0) -> None:
        """The quadratic and box-mean terms of every style by ridge least squares over LSQ_PIXELS random pixels
        of every frame (the per-pixel baseline's solve, training/baselines.py, with 45 more features)."""
        gen = torch.Generator().manual_seed(seed)
        n_features, s = FEATURES + self.linear.in_channels, len(self.styles)
        xtx = torch.zeros(n_features, n_features, dtype=torch.float64)
        xty = torch.zeros(n_features, 3 * s, dtype=torch.float64)
        for i in range(len(frames)):
            g = frames.gbuffer[i:i + 1].double() / 255
            x = torch.cat([quadratic_features(g, dim=1), box_means(g)], dim=1)[0].flatten(1)    # (F, HW)
            pick = torch.randperm(x.shape[1], generator=gen)[:LSQ_PIXELS]
            x, y = x[:, pick].T, frames.targets[i].flatten(2)[..., pick].double().flatten(0, 1).T / 255
            xtx += x.T @ x
            xty += x.T @ y
        ridge = RIDGE * torch.trace(xtx) / n_features * torch.eye(n_features, dtype=torch.float64)
        w = torch.linalg.solve(xtx + ridge, xty)                                                  # (F, 3S)
        self.quadratic.copy_(w[:FEATURES].unflatten(1, (s, 3)).permute(1, 0, 2))
        self.linear.weight.copy_(w[FEATURES:].T[..., None, None])

    @torch.no_grad()
    def predict(self, gbuffer: np.ndarray, style: str) -> np.ndarray:
        """uint8 (N, 5, H, W, 3) → uint8 (N, H, W, 3): `style`'s frames."""
        out = self(gbuffer_input(gbuffer))[:, self.styles.index(style)]
        return out.clamp(0, 1).mul(255).round().byte().permute(0, 2, 3, 1).numpy()


def receptive_field(net: ConvBaseline, g: torch.Tensor | None = None, points: int = 8, seed: int = 0) -> int:
    """The width (px) of the input that moves one output pixel, measured: for `points` pixels along the middle
    row of `g` (N, 15, H, W) in [0, 1] (default a random 71 x 71 input), the gradient of that pixel's colours
    (every style) with respect to the input, in float64; its extent along rows and columns where it is above 1e-9
    of its largest value (the integral image's differences leave rounding residue of ~1e-16 outside the boxes);
    the widest over the pixels (a ReLU off at one pixel hides a path there, not everywhere)."""
    if g is None:
        g = torch.rand(1, GBUFFER_VALUES, 2 * RECEPTIVE_FIELD + 1, 2 * RECEPTIVE_FIELD + 1,
                       generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    g = g[:1].double()
    h, w = g.shape[-2:]
    margin = min(RECEPTIVE_FIELD // 2, (w - 1) // 2)
    xs = torch.linspace(margin, w - 1 - margin, points).round().long().unique().tolist()
    widest = 0
    net.double()
    try:
        for x in xs:
            probe = g.clone().requires_grad_(True)
            net(probe)[0, :, :, h // 2, x].sum().backward()
            assert probe.grad is not None            # backward() filled it: probe requires grad
            grad = probe.grad[0].abs().sum(0)
            moved = grad > 1e-9 * grad.max()
            rows, cols = moved.any(1).nonzero().flatten(), moved.any(0).nonzero().flatten()
            if len(rows):
                widest = max(widest, int(rows.max() - rows.min()) + 1, int(cols.max() - cols.min()) + 1)
    finally:
        net.float()
    return widest


@dataclass
class ConvFrames:
    """What the conv baseline is fitted on: G-buffer (N, 15, H, W) and every style's target (N, S, 3, H, W),
    uint8."""

    gbuffer: torch.Tensor
    targets: torch.Tensor

    def __len__(self) -> int:
        return len(self.gbuffer)


def fit_conv(frames: ConvFrames, styles: list[str], minutes: float, seed: int = 0,
             hidden: int = HIDDEN) -> tuple[ConvBaseline, dict]:
    """Least squares, then Adam on random batches of `frames` (the trunk and its heads, every style at once)
    until `minutes` of wall time are spent in all (at least one step)."""
    torch.manual_seed(seed)
    t0 = time.perf_counter()
    net = ConvBaseline(styles, hidden)
    net.fit_least_squares(frames, seed)
    lsq_seconds = time.perf_counter() - t0
    net.linear.requires_grad_(False)
    optimizer = torch.optim.Adam([p for p in net.parameters() if p.requires_grad], lr=LR)
    gen = torch.Generator().manual_seed(seed)
    steps, loss = 0, float("nan")
    while steps == 0 or time.perf_counter() - t0 < 60 * minutes:
        idx = torch.randint(len(frames), (min(BATCH, len(frames)),), generator=gen)
        step_loss = F.mse_loss(net(frames.gbuffer[idx].float() / 255), frames.targets[idx].float() / 255)
        optimizer.zero_grad(set_to_none=True)
        step_loss.backward()
        optimizer.step()
        steps, loss = steps + 1, step_loss.item()
    net.requires_grad_(False).eval()
    return net, {"minutes_budget": minutes, "seconds": round(time.perf_counter() - t0, 1),
                 "least_squares_seconds": round(lsq_seconds, 1), "steps": steps,
                 "batch": BATCH, "frames": len(frames), "last_loss": round(loss, 6),
                 "receptive_field_px": receptive_field(net, frames.gbuffer[:1].double() / 255),   # on a real frame
                 "receptive_field_stated_px": RECEPTIVE_FIELD,
                 "parameters": sum(p.numel() for p in net.parameters())}
