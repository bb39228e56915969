"""Image and video metrics of a rendered stream against its ground truth, accumulated frame by frame.

    psnr      dB, mean over frames of 10 log10(255^2 / MSE)
    ssim      mean SSIM (Gaussian window 11, sigma 1.5, per RGB channel, Wang et al. 2004 constants)
    flicker   mean |Δt output - Δt ground truth| in 8-bit levels, Δt = frame t minus frame t-1
    flicker_ratio   flicker / mean |Δt ground truth|: 0 = the output changes exactly as the truth does;
                    1 = as wrong as a frozen image; larger = changes the truth does not have (flicker)
    motion_ratio    mean |Δt output| / mean |Δt ground truth| (how much the output moves, for context)
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import torch
import torch.nn.functional as F

SSIM_C1, SSIM_C2 = (0.01 * 255) ** 2, (0.03 * 255) ** 2


def _gaussian_window(size: int = 11, sigma: float = 1.5) -> torch.Tensor:
    x = torch.arange(size, dtype=torch.float64) - size // 2
    g = torch.exp(-x ** 2 / (2 * sigma ** 2))
    return (g / g.sum()).float()


_WINDOW = _gaussian_window()


def ssim(a: np.ndarray, b: np.ndarray) -> float:
    """SSIM of two uint8 (H, W, 3) images (valid region, separable Gaussian filter)."""
    return float(ssim_map(a, b).mean())


def ssim_map(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Per-window SSIM of two uint8 (H, W, 3) images, the channels' mean: float64 (H - k + 1, W - k + 1) for the
    window side k, the window centred on pixel (i + k // 2, j + k // 2) (scoring a region of the image)."""
    x = torch.from_numpy(a).permute(2, 0, 1).unsqueeze(1).double()       # (3, 1, H, W)
    y = torch.from_numpy(b).permute(2, 0, 1).unsqueeze(1).double()
    side = min(x.shape[-2:])
    w = (_WINDOW if side >= _WINDOW.numel() else _gaussian_window(side if side % 2 else side - 1)).double()

    def blur(t: torch.Tensor) -> torch.Tensor:
        t = F.conv2d(t, w.view(1, 1, 1, -1))
        return F.conv2d(t, w.view(1, 1, -1, 1))

    mx, my = blur(x), blur(y)
    vx, vy, cxy = blur(x * x) - mx ** 2, blur(y * y) - my ** 2, blur(x * y) - mx * my
    s = ((2 * mx * my + SSIM_C1) * (2 * cxy + SSIM_C2)) / ((mx ** 2 + my ** 2 + SSIM_C1) * (vx + vy + SSIM_C2))
    return s.mean(dim=(0, 1)).numpy()


def psnr(a: np.ndarray, b: np.ndarray) -> float:
    mse = float(np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2))
    return 100.0 if mse == 0 else 10 * math.log10(255.0 ** 2 / mse)


@dataclass
class StreamMetrics:
    """Feed (output, truth) frame pairs in stream order; `summary()` gives the figures above."""

    frames: int = 0
    psnr_sum: float = 0.0
    ssim_sum: float = 0.0
    flicker_sum: float = 0.0
    truth_motion_sum: float = 0.0
    output_motion_sum: float = 0.0
    deltas: int = 0
    extra: dict[str, float] = field(default_factory=dict)     # e.g. lpips sums
    _last: tuple[np.ndarray, np.ndarray] | None = None

    def update(self, output: np.ndarray, truth: np.ndarray) -> None:
        self.frames += 1
        self.psnr_sum += psnr(output, truth)
        self.ssim_sum += ssim(output, truth)
        o, t = output.astype(np.int16), truth.astype(np.int16)
        if self._last is not None:
            do, dt = o - self._last[0], t - self._last[1]
            self.flicker_sum += float(np.abs(do - dt).mean())
            self.truth_motion_sum += float(np.abs(dt).mean())
            self.output_motion_sum += float(np.abs(do).mean())
            self.deltas += 1
        self._last = (o, t)

    def add(self, name: str, value: float) -> None:
        self.extra[name] = self.extra.get(name, 0.0) + value

    def merged(self, other: "StreamMetrics") -> "StreamMetrics":
        out = StreamMetrics(self.frames + other.frames, self.psnr_sum + other.psnr_sum,
                            self.ssim_sum + other.ssim_sum, self.flicker_sum + other.flicker_sum,
                            self.truth_motion_sum + other.truth_motion_sum,
                            self.output_motion_sum + other.output_motion_sum, self.deltas + other.deltas)
        for k in {*self.extra, *other.extra}:
            out.extra[k] = self.extra.get(k, 0.0) + other.extra.get(k, 0.0)
        return out

    def summary(self) -> dict:
        n, d = max(self.frames, 1), max(self.deltas, 1)
        truth_motion = self.truth_motion_sum / d
        out = {"frames": self.frames, "psnr": round(self.psnr_sum / n, 3), "ssim": round(self.ssim_sum / n, 4),
               "flicker": round(self.flicker_sum / d, 4),
               "flicker_ratio": round(self.flicker_sum / d / truth_motion, 4) if truth_motion > 0 else None,
               "motion_ratio": round(self.output_motion_sum / d / truth_motion, 4) if truth_motion > 0 else None}
        for k, v in self.extra.items():
            out[k] = round(v / n, 4)
        return out
