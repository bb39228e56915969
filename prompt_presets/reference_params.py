"""The reference renderer's per-style parameters, as stored in the preset data files.

A preset lists only the fields that differ from the defaults below (a neutral, clear daylight look).
Colours are linear RGB in 0..~1 (light colours may exceed 1); directions are view space (x right, y up,
z towards the camera) pointing *towards* the light; strengths are 0..1 unless noted.
Blending is linear on every field (directions are renormalised by the renderer), so a 50/50 blend of two
presets is the field-wise average: this is what makes schedule transitions smooth in the reference renderer.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, Iterable

from alaya_errors import UserError

Vec3 = tuple[float, float, float]


@dataclass(frozen=True)
class ReferenceParams:
    # key light (Lambert + GGX); intensity multiplies the colour
    sun_color: Vec3 = (1.0, 0.95, 0.88)
    sun_intensity: float = 2.2
    sun_direction: Vec3 = (0.35, 0.75, 0.55)
    # hemisphere ambient: sky_light from above, ground_light from below, scaled by `ambient`
    sky_light: Vec3 = (0.5, 0.65, 0.9)
    ground_light: Vec3 = (0.3, 0.27, 0.22)
    ambient: float = 0.55
    # background where there is no geometry: vertical gradient plus a glow around the sun
    sky_top: Vec3 = (0.22, 0.42, 0.8)
    sky_horizon: Vec3 = (0.68, 0.78, 0.92)
    # exponential depth fog; density per metre
    fog_color: Vec3 = (0.68, 0.78, 0.92)
    fog_density: float = 0.003
    # emissive neon edges (depth/normal discontinuities), coloured a → b by the surface's facing (left → right)
    edge_glow: float = 0.0
    edge_color_a: Vec3 = (1.0, 0.1, 0.8)
    edge_color_b: Vec3 = (0.1, 0.9, 1.0)
    # snow cover on up-facing surfaces
    snow: float = 0.0
    # lava: glowing cracks on dark, up-facing ground (see docs/presets.md)
    lava: float = 0.0
    lava_color: Vec3 = (1.0, 0.3, 0.04)
    # airborne dust/sand: a dense, sun-lit second fog layer with wind streaks
    haze: float = 0.0
    haze_color: Vec3 = (0.85, 0.62, 0.35)
    # underwater caustics (a function of view-space position and time), tinted
    caustics: float = 0.0
    caustic_color: Vec3 = (0.6, 0.95, 1.0)
    # thermal camera: 0 = normal image, 1 = full heat palette
    infrared: float = 0.0
    # grading, applied to the tone-mapped image in this order:
    # exposure → tint → lift/gamma/gain → contrast → saturation → duotone (a gradient map dark → light)
    exposure: float = 1.0
    tint: Vec3 = (1.0, 1.0, 1.0)
    lift: Vec3 = (0.0, 0.0, 0.0)
    gamma: Vec3 = (1.0, 1.0, 1.0)
    gain: Vec3 = (1.0, 1.0, 1.0)
    contrast: float = 1.0
    saturation: float = 1.0
    duotone: float = 0.0
    duotone_dark: Vec3 = (0.1, 0.0, 0.25)
    duotone_light: Vec3 = (1.0, 0.6, 0.9)
    # post: bloom of everything brighter than the threshold (linear units), darkened corners
    bloom: float = 0.15
    bloom_threshold: float = 0.9
    vignette: float = 0.15

    @classmethod
    def from_dict(cls, raw: Any, where: str) -> "ReferenceParams":
        """Validate a preset file's `reference` object; missing fields take the defaults."""
        if not isinstance(raw, dict):
            raise UserError(f"expected an object of renderer parameters, got {type(raw).__name__}", where)
        known = {f.name: f for f in fields(cls)}
        values: dict[str, Any] = {}
        for key, value in raw.items():
            if key not in known:
                raise UserError(f"unknown parameter {key!r}; known: {', '.join(known)}", f"{where}.{key}")
            default = known[key].default
            if isinstance(default, tuple):
                values[key] = _vec3(value, f"{where}.{key}")
                if key.endswith("_direction") and not any(values[key]):
                    raise UserError("a direction cannot be (0, 0, 0)", f"{where}.{key}")
            else:
                values[key] = _number(value, f"{where}.{key}")
        return cls(**values)

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


def _number(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value:
        raise UserError(f"expected a number, got {value!r}", where)
    return float(value)


def _vec3(value: Any, where: str) -> Vec3:
    if not isinstance(value, (list, tuple)) or len(value) != 3:
        raise UserError(f"expected a list of 3 numbers, got {value!r}", where)
    return tuple(_number(v, where) for v in value)  # type: ignore[return-value]
