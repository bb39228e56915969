"""The reference renderer's per-style parameters, as stored in the preset data files.

A preset lists only the fields that differ from the defaults below (a neutral, clear daylight look).
Colours are linear RGB in 0..~1 (light colours may exceed 1); directions are view space (x right, y up,
z towards the camera) pointing *towards* the light; strengths are 0..1 unless noted.
Blending is linear on every field (directions are renormalised by the renderer), so a 50/50 blend of two
presets is the field-wise average: this is what makes schedule transitions smooth in the reference renderer.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Annotated, Any, Iterable

from pydantic import AfterValidator, BeforeValidator, ConfigDict


def _number(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value:
        raise ValueError(f"expected a number, got {value!r}")
    return float(value)


def _vec3(value: Any) -> tuple[float, float, float]:
    if not isinstance(value, (list, tuple)) or len(value) != 3:
        raise ValueError(f"expected a list of 3 numbers, got {value!r}")
    return tuple(_number(v) for v in value)  # type: ignore[return-value]


def _direction(value: tuple[float, float, float]) -> tuple[float, float, float]:
    if not any(value):
        raise ValueError("a direction cannot be (0, 0, 0)")
    return value


# Strict on input (a preset file's "true" or "0.5" is a mistake, not a number), plain floats once validated.
Number = Annotated[float, BeforeValidator(_number)]
Vec3 = Annotated[tuple[float, float, float], BeforeValidator(_vec3)]
Direction = Annotated[tuple[float, float, float], BeforeValidator(_vec3), AfterValidator(_direction)]


@dataclass(frozen=True)
class ReferenceParams:
    # Validated by pydantic as the `reference` object of a preset (prompt_presets.presets.Preset): unknown fields
    # are refused, missing ones take the defaults below.
    __pydantic_config__ = ConfigDict(extra="forbid")

    # key light (Lambert + GGX); intensity multiplies the colour
    sun_color: Vec3 = (1.0, 0.95, 0.88)
    sun_intensity: Number = 2.2
    sun_direction: Direction = (0.35, 0.75, 0.55)
    # hemisphere ambient: sky_light from above, ground_light from below, scaled by `ambient`
    sky_light: Vec3 = (0.5, 0.65, 0.9)
    ground_light: Vec3 = (0.3, 0.27, 0.22)
    ambient: Number = 0.55
    # background where there is no geometry: vertical gradient plus a glow around the sun
    sky_top: Vec3 = (0.22, 0.42, 0.8)
    sky_horizon: Vec3 = (0.68, 0.78, 0.92)
    # exponential depth fog; density per metre
    fog_color: Vec3 = (0.68, 0.78, 0.92)
    fog_density: Number = 0.003
    # emissive neon edges (depth/normal discontinuities), coloured a → b by the surface's facing (left → right)
    edge_glow: Number = 0.0
    edge_color_a: Vec3 = (1.0, 0.1, 0.8)
    edge_color_b: Vec3 = (0.1, 0.9, 1.0)
    # snow cover on up-facing surfaces
    snow: Number = 0.0
    # lava: glowing cracks on dark, up-facing ground (see docs/presets.md)
    lava: Number = 0.0
    lava_color: Vec3 = (1.0, 0.3, 0.04)
    # airborne dust/sand: a dense, sun-lit second fog layer with wind streaks
    haze: Number = 0.0
    haze_color: Vec3 = (0.85, 0.62, 0.35)
    # underwater caustics (a function of view-space position and time), tinted
    caustics: Number = 0.0
    caustic_color: Vec3 = (0.6, 0.95, 1.0)
    # thermal camera: 0 = normal image, 1 = full heat palette
    infrared: Number = 0.0
    # grading, applied to the tone-mapped image in this order:
    # exposure → tint → lift/gamma/gain → contrast → saturation → duotone (a gradient map dark → light)
    exposure: Number = 1.0
    tint: Vec3 = (1.0, 1.0, 1.0)
    lift: Vec3 = (0.0, 0.0, 0.0)
    gamma: Vec3 = (1.0, 1.0, 1.0)
    gain: Vec3 = (1.0, 1.0, 1.0)
    contrast: Number = 1.0
    saturation: Number = 1.0
    duotone: Number = 0.0
    duotone_dark: Vec3 = (0.1, 0.0, 0.25)
    duotone_light: Vec3 = (1.0, 0.6, 0.9)
    # post: bloom of everything brighter than the threshold (linear units), darkened corners
    bloom: Number = 0.15
    bloom_threshold: Number = 0.9
    vignette: Number = 0.15

    def as_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


def blend_params(weighted: Iterable[tuple[ReferenceParams, float]]) -> ReferenceParams:
    """Weighted field-wise sum; weights are expected to sum to 1 (as in a Conditioning)."""
    weighted = list(weighted)
    if len(weighted) == 1:
        return weighted[0][0]
    out: dict[str, Any] = {}
    for f in fields(ReferenceParams):
        vals = [(getattr(p, f.name), w) for p, w in weighted]
        if isinstance(vals[0][0], tuple):
            out[f.name] = tuple(sum(v[i] * w for v, w in vals) for i in range(3))
        else:
            out[f.name] = sum(v * w for v, w in vals)
    return ReferenceParams(**out)

