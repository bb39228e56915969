"""Per-style effects on a decoded surface. Every effect is a pure function of the frame (its pixels and its
timestamp) and the style, so a frame always renders the same way and nothing flickers.

Shapes: (3, H, W) for colours, (1, H, W) for masks; colours are linear.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from renderer.reference.style import Style
from renderer.reference.surface import Surface, dot, srgb_to_linear

_SNOW_ALBEDO = (0.8, 0.85, 0.92)
# Ironbow thermal palette, cold → hot, sRGB.
IRONBOW = ((0.0, 0.0, 0.02), (0.12, 0.02, 0.35), (0.45, 0.02, 0.55), (0.8, 0.1, 0.35),
            (0.95, 0.35, 0.05), (1.0, 0.65, 0.0), (1.0, 0.9, 0.3), (1.0, 1.0, 0.9))


def luminance(rgb: torch.Tensor) -> torch.Tensor:
    return 0.2126 * rgb[0:1] + 0.7152 * rgb[1:2] + 0.0722 * rgb[2:3]


def _smoothstep(e0: float, e1: float, x: torch.Tensor) -> torch.Tensor:
    t = ((x - e0) / (e1 - e0)).clamp(0.0, 1.0)
    return t * t * (3.0 - 2.0 * t)


def snow_cover(s: Surface, amount: float, albedo: torch.Tensor) -> torch.Tensor:
    """(1, H, W) snow fraction: surfaces whose normal points up (view-space y; the camera is near level).
    Dark surfaces (asphalt, tracks) hold less, so roads stay readable under the snow."""
    up = _smoothstep(0.35, 0.75, s.normal[1:2])
    holds = 0.5 + 0.5 * _smoothstep(0.02, 0.12, luminance(albedo))
    return up * holds * (~s.sky) * min(amount, 1.0)


def apply_snow(s: Surface, amount: float, albedo: torch.Tensor, roughness: torch.Tensor,
               metallic: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Snow over the surface: (albedo, roughness, metallic) with snow where `snow_cover` says."""
    cover = snow_cover(s, amount, albedo)
    snow = torch.tensor(_SNOW_ALBEDO, device=albedo.device).view(3, 1, 1)
    return (albedo + (snow - albedo) * cover, roughness + (0.55 - roughness) * cover,
            metallic * (1.0 - cover))


def lava_glow(s: Surface, style: Style, albedo: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Lava runs in the cracks of up-facing ground: pixels much darker than their neighbourhood (grooves,
    seams, dark texture detail) or very dark outright, so it is anchored to the world's own texture and moves
    with it. Distant low ground glows faintly (a hot horizon); all other surfaces are charred (darker).
    Returns (charred albedo, emissive radiance)."""
    lum = luminance(albedo)
    local = F.avg_pool2d(lum[None], 9, stride=1, padding=4, count_include_pad=False)[0]
    crack = torch.maximum(_smoothstep(0.75, 0.35, lum / local.clamp_min(1e-4)), _smoothstep(0.02, 0.004, lum))
    ground = _smoothstep(0.5, 0.9, s.normal[1:2]) * (~s.sky)
    horizon = _smoothstep(20.0, 150.0, s.depth_m)
    heat = (ground * (crack + 0.3 * horizon)).clamp(0.0, 1.0) * style.lava
    charred = albedo * (1.0 - 0.75 * style.lava)
    return charred * (1.0 - heat), style.lava_color * (heat * 6.0)


def neon_edges(s: Surface, style: Style) -> torch.Tensor:
    """Emissive tubes along depth and normal discontinuities, coloured a→b by the facing (normal x)."""
    d = F.pad(s.log_depth, (1, 1, 1, 1), mode="replicate")
    n = F.pad(s.normal, (1, 1, 1, 1), mode="replicate")
    dd = (d[:, 1:-1, 2:] - d[:, 1:-1, :-2]).abs() + (d[:, 2:, 1:-1] - d[:, :-2, 1:-1]).abs()
    nn = (2.0 - dot(n[:, 1:-1, 2:], n[:, 1:-1, :-2]) - dot(n[:, 2:, 1:-1], n[:, :-2, 1:-1]))
    edge = (_smoothstep(0.02, 0.06, dd) + _smoothstep(0.15, 0.5, nn)).clamp(0.0, 1.0)
    edge = F.max_pool2d(edge[None], 3, stride=1, padding=1)[0]  # a tube ~3 px wide
    edge = edge * torch.exp(-s.depth_m / 80.0)  # distant clutter fades instead of turning into noise
    side = 0.5 + 0.5 * s.normal[0:1]
    color = style.edge_color_a + (style.edge_color_b - style.edge_color_a) * side
    return color * (edge * 5.0 * style.edge_glow)


def caustics(s: Surface, style: Style, time_s: float) -> torch.Tensor:
    """(1, H, W) caustic light pattern 0..~1.5, a function of the view-space point projected along y (light
    from above), drifting slowly with the frame's timestamp; strongest on up-facing, near surfaces."""
    u = s.position[0:1] * 1.3
    w = s.position[2:3] * 1.3
    t = time_s * 0.8
    a = torch.sin(u + torch.sin(w * 0.9 + t) * 1.6 + t * 0.7)
    b = torch.sin(w * 1.1 + torch.sin(u * 0.8 - t * 0.9) * 1.6 - t * 0.5)
    c = torch.sin((u + w) * 0.7 + torch.sin(u - w + t) * 1.2)
    ridge = (1.0 - (a + b + c).abs() / 3.0) ** 6  # bright thin lines where the waves cancel
    facing = 0.35 + 0.65 * s.normal[1:2].clamp_min(0.0)
    return ridge * 1.5 * facing * torch.exp(-s.depth_m / 30.0) * (~s.sky) * style.caustics


def haze(s: Surface, style: Style, radiance: torch.Tensor, time_s: float) -> torch.Tensor:
    """Airborne sand/dust: a dense second fog lit by the sun (brighter looking towards it), with slanted wind
    streaks that drift with the timestamp."""
    ray = -s.view
    x, y = ray[0:1], ray[1:2]
    streak = 1.0 + 0.25 * torch.sin(x * 40.0 + y * 14.0 - time_s * 6.0) * torch.sin(x * 9.0 - y * 30.0 + time_s)
    distance = torch.where(s.sky, torch.full_like(s.depth_m, 400.0), s.depth_m)
    density = 1.0 - torch.exp(-distance * (0.06 * style.haze) * streak)
    toward_sun = dot(ray, style.sun_direction).clamp_min(0.0) ** 4
    color = style.haze_color * (0.7 + 0.6 * toward_sun * style.sun_intensity / 2.0)
    amount = (density * min(style.haze * 1.1, 1.0)).clamp(0.0, 0.97)
    return radiance + (color - radiance) * amount


def fog(s: Surface, style: Style, radiance: torch.Tensor) -> torch.Tensor:
    """Exponential depth fog on geometry; the sky is the fog's far end already."""
    amount = (1.0 - torch.exp(-s.depth_m * style.fog_density)) * (~s.sky)
    return radiance + (style.fog_color - radiance) * amount


def infrared(s: Surface, style: Style, radiance: torch.Tensor, metallic: torch.Tensor) -> torch.Tensor:
    """Thermal-camera look: heat = lit brightness + metal (engines, machinery) + nearness; sky is cold.
    Mapped through an ironbow palette and mixed in by the style's `infrared` amount."""
    lit = luminance(radiance)
    heat = 0.75 * lit / (lit + 0.25) + 0.45 * metallic + 0.45 * s.log_depth - 0.3
    heat = torch.where(s.sky, 0.04 * (1.0 + s.view[1:2]), heat).clamp(0.0, 1.0)
    thermal = _palette(heat, IRONBOW) * 1.2
    return radiance + (thermal - radiance) * style.infrared


def _palette(x: torch.Tensor, stops) -> torch.Tensor:
    """(1, H, W) in 0..1 → (3, H, W) linear colour, piecewise linear between sRGB stops."""
    lut = srgb_to_linear(torch.tensor(stops, dtype=torch.float32, device=x.device))  # (S, 3)
    pos = x[0] * (len(stops) - 1)
    i = pos.floor().long().clamp(0, len(stops) - 2)
    f = (pos - i)[..., None]
    return (lut[i] * (1 - f) + lut[i + 1] * f).permute(2, 0, 1)
