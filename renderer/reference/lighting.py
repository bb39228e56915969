"""Physically based lighting of a decoded surface: Cook-Torrance (GGX, Smith-Schlick, Schlick Fresnel) for the
key light, Lambert diffuse, a hemisphere sky/ground ambient, and the background sky. Linear HDR radiance.

Convention: a white Lambert surface facing a key light of intensity I reflects I (the π of the BRDF is folded
into the light), so preset intensities read as "how bright a lit white wall is".
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from renderer.reference.style import Style
from renderer.reference.surface import Surface, along, dot

_DIELECTRIC_F0 = 0.04


def ambient_occlusion(s: Surface) -> torch.Tensor:
    """(1, H, W) 0.4..1: a screen-space occlusion estimate from depth alone. A pixel whose neighbourhood
    (~1/20 of the image height) is on average nearer than itself sits in a crease or behind an object's
    silhouette and gets less sky light; this gives contact shading and depth cues a G-buffer cannot carry.
    Computed at quarter resolution (log depth, the stored 0..1 value)."""
    h, w = s.log_depth.shape[-2:]
    small = F.avg_pool2d(s.log_depth[None], 4, ceil_mode=True)
    radius = max(1, h // 80)
    near = F.avg_pool2d(small, 2 * radius + 1, stride=1, padding=radius, count_include_pad=False)
    near = F.interpolate(near, size=(h, w), mode="bilinear", align_corners=False)[0]
    return 1.0 - ((near - s.log_depth) * 12.0).clamp(0.0, 0.6)


def shade(s: Surface, albedo: torch.Tensor, roughness: torch.Tensor, metallic: torch.Tensor,
          style: Style) -> torch.Tensor:
    """(3, H, W) reflected radiance. albedo/roughness/metallic may differ from `s` (snow, lava change them)."""
    n, v, l = s.normal, s.view, style.sun_direction  # noqa: E741 - the BRDF's usual names, as in the comment below
    # Half vector h = (v + l) / |v + l| is never built: n·h and v·h follow from n·v, n·l and v·l,
    # which keeps every term but the colours at (1, H, W).
    n_l_raw, v_l = along(n, l), along(v, l)
    n_v = dot(n, v).clamp_min(1e-3)
    inv_len = torch.rsqrt((2.0 + 2.0 * v_l).clamp_min(1e-6))
    n_h = ((n_v + n_l_raw) * inv_len).clamp_min(0.0)
    v_h = ((1.0 + v_l) * inv_len).clamp(0.0, 1.0)
    n_l = n_l_raw.clamp_min(0.0)

    r = roughness.clamp(0.045, 1.0)
    a2 = (r * r).square()
    d = a2 / (torch.pi * (n_h.square() * (a2 - 1.0) + 1.0).square())
    k = (r + 1.0).square() * 0.125
    g = (n_v / (n_v * (1 - k) + k)) * (n_l / (n_l * (1 - k) + k))
    f0 = _DIELECTRIC_F0 + (albedo - _DIELECTRIC_F0) * metallic
    m = 1.0 - v_h
    schlick = m.square().square() * m  # (1 − v·h)^5
    fresnel = f0 + (1.0 - f0) * schlick
    spec_scale = d * g / (4.0 * n_v * n_l.clamp_min(1e-3))        # (1, H, W)
    kd = (1.0 - metallic) / torch.pi                               # (1, H, W)

    sun = style.sun_color * (style.sun_intensity * torch.pi)
    # diffuse (1 − F)·kd·albedo + specular F·D·G/(4 n·v n·l), with F = f0 + (1 − f0)·schlick
    brdf = torch.addcmul(fresnel * spec_scale, albedo * kd, 1.0 - fresnel)
    direct = brdf * (sun * n_l)

    # hemisphere ambient: normals pointing up see the sky, down see the ground; metals reflect it via F0
    up = 0.5 + 0.5 * n[1:2]
    hemi = torch.lerp(style.ground_light, style.sky_light, up) * style.ambient
    ambient = hemi * (albedo * (1.0 - metallic) + f0 * (1.0 - 0.7 * r))
    occlusion = ambient_occlusion(s)
    return direct * (0.5 + 0.5 * occlusion) + ambient * occlusion


def sky(s: Surface, style: Style) -> torch.Tensor:
    """(3, H, W) background radiance along each pixel's ray: horizon → zenith gradient and a sun glow."""
    ray = -s.view
    height = ray[1:2].clamp(0.0, 1.0)
    t = (height / 0.6).clamp(0.0, 1.0) ** 0.7
    base = style.sky_horizon + (style.sky_top - style.sky_horizon) * t
    below = (-ray[1:2]).clamp(0.0, 1.0)  # under the horizon (no ground drawn there): darken towards fog
    base = base * (1.0 - 0.5 * below)
    cos_sun = dot(ray, style.sun_direction).clamp_min(0.0)
    glow = style.sun_color * (style.sun_intensity * (0.08 * cos_sun ** 8 + 2.0 * cos_sun ** 400))
    return base + glow
