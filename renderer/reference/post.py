"""Post-processing: bloom on linear HDR, ACES tone mapping, grading in display (sRGB-encoded) space,
vignette, and the final 8-bit image. Shapes (3, H, W)."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from renderer.reference.effects import luminance
from renderer.reference.style import Style
from renderer.reference.surface import linear_to_srgb


def gaussian_kernel(sigma: float, device: torch.device | None = None) -> torch.Tensor:
    """The normalised 1-D Gaussian of `_blur` (radius 2.5 sigma)."""
    radius = max(1, int(round(2.5 * sigma)))
    x = torch.arange(-radius, radius + 1, dtype=torch.float32, device=device)
    k = torch.exp(-0.5 * (x / sigma) ** 2)
    return k / k.sum()


def _blur(img: torch.Tensor, sigma: float) -> torch.Tensor:
    """Separable Gaussian blur of (C, h, w), per channel, edges replicated."""
    k = gaussian_kernel(sigma, img.device)
    c, r = img.shape[0], (k.numel() - 1) // 2
    x = F.pad(img[None], (r, r, 0, 0), mode="replicate")
    x = F.conv2d(x, k.view(1, 1, 1, -1).expand(c, 1, 1, -1), groups=c)
    x = F.pad(x, (0, 0, r, r), mode="replicate")
    return F.conv2d(x, k.view(1, 1, -1, 1).expand(c, 1, -1, 1), groups=c)[0]


def bloom(radiance: torch.Tensor, style: Style) -> torch.Tensor:
    """Adds the glow of everything above `bloom_threshold`: two blurred levels, 1/4 and 1/16 resolution."""
    if style.bloom <= 1e-3:
        return radiance
    h, w = radiance.shape[-2:]
    bright = (radiance - style.bloom_threshold).clamp_min_(0.0)
    small = F.avg_pool2d(bright[None], 4, ceil_mode=True)           # (1, 3, h/4, w/4)
    tiny = F.avg_pool2d(small, 4, ceil_mode=True)                   # (1, 3, h/16, w/16)
    glow = _blur(small[0], 1.5) + F.interpolate(_blur(tiny[0], 1.5)[None], size=small.shape[-2:],
                                                 mode="bilinear", align_corners=False)[0]
    glow = F.interpolate(glow[None], size=(h, w), mode="bilinear", align_corners=False)[0]
    return torch.add(radiance, glow, alpha=style.bloom)


def tonemap(radiance: torch.Tensor, exposure: float) -> torch.Tensor:
    """ACES filmic curve (Narkowicz fit): linear HDR → linear display 0..1."""
    x = radiance.clamp_min(0.0) * exposure
    return ((x * (2.51 * x + 0.03)) / (x * (2.43 * x + 0.59) + 0.14)).clamp(0.0, 1.0)


def grade(display: torch.Tensor, style: Style) -> torch.Tensor:
    """Colour grading on sRGB-encoded values 0..1: tint → lift/gamma/gain → contrast → saturation → duotone.
    Identity steps are skipped (most presets leave gamma and lift alone)."""
    p = style.params
    c = (display * style.tint).clamp_(0.0, 1.0)
    if p.lift != (0.0, 0.0, 0.0):
        c = c + style.lift * (1.0 - c)
    if p.gain != (1.0, 1.0, 1.0):
        c = c * style.gain
    if p.gamma != (1.0, 1.0, 1.0):
        c = c.clamp(0.0, 1.0) ** (1.0 / style.gamma.clamp_min(0.05))
    if p.contrast != 1.0:
        c = (c - 0.5).mul_(p.contrast).add_(0.5)
    if p.saturation != 1.0:
        y = luminance(c)
        c = torch.lerp(y, c, p.saturation)
    if p.duotone > 1e-3:
        y = luminance(c).clamp(0.0, 1.0)
        c = torch.lerp(c, torch.lerp(style.duotone_dark, style.duotone_light, y), p.duotone)
    return c.clamp_(0.0, 1.0)


class Vignette:
    """Darkened corners; the radial falloff is computed once per size."""

    def __init__(self, height: int, width: int, device: torch.device):
        ys = torch.linspace(-1, 1, height, device=device).view(-1, 1)
        xs = torch.linspace(-1, 1, width, device=device).view(1, -1)
        self.r2 = ((xs ** 2 + ys ** 2) / 2.0)[None]  # (1, H, W), 0 centre → 1 corners

    def __call__(self, c: torch.Tensor, strength: float) -> torch.Tensor:
        return c if strength <= 1e-3 else c * (1.0 - strength * self.r2 ** 1.5)


class SrgbEncoder:
    """Linear 0..1 → sRGB-encoded 0..1 through a 4096-entry table (under 1/255 from the exact curve)."""

    SIZE = 4096

    def __init__(self, device: torch.device):
        self.lut = linear_to_srgb(torch.linspace(0.0, 1.0, self.SIZE, device=device))

    def __call__(self, linear: torch.Tensor) -> torch.Tensor:
        return self.lut[(linear * (self.SIZE - 1) + 0.5).long()]


def to_display(radiance: torch.Tensor, style: Style, encode: SrgbEncoder) -> torch.Tensor:
    """Linear HDR → graded sRGB 0..1 (before the vignette)."""
    return grade(encode(tonemap(radiance, style.exposure)), style)


def to_uint8(c: torch.Tensor) -> torch.Tensor:
    """(3, H, W) 0..1 → uint8 (H, W, 3)."""
    return (c * 255.0 + 0.5).clamp(0, 255).to(torch.uint8).permute(1, 2, 0)
