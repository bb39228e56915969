"""A rendered multilayer EXR → one G-buffer frame and its paired RGB, by the rules of gbuffer/encoding.py.

- albedo: the base-colour AOV (scene-linear) → sRGB;
- depth: the Z pass (distance along the camera axis, metres) → the log rule; background → 0;
- normal: the Normal pass (world space) turned into the camera's space (x right, y up, z towards the camera);
- metallic, roughness: their AOVs;
- rgb: the combined pass (scene-linear) → sRGB, clipped (Blender's "Standard" view transform).
Pixels with no geometry read as the built-in engine's sky: the combined colour as albedo, facing the camera,
not metallic, fully rough.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np

from gbuffer.encoding import encode_depth, encode_normal, encode_unit
from gbuffer.frame import GBufferError, GBufferFrame

BACKGROUND_Z = 1e9      # Cycles writes 1e10 where a ray leaves the scene


def linear_to_srgb(x: np.ndarray) -> np.ndarray:
    """Scene-linear 0..1 → sRGB-encoded uint8 (the IEC 61966-2-1 curve)."""
    x = np.clip(np.asarray(x, np.float32), 0.0, 1.0)
    s = np.where(x <= 0.0031308, 12.92 * x, 1.055 * np.power(x, 1 / 2.4) - 0.055)
    return np.round(s * 255.0).astype(np.uint8)


def read_layers(path: str | Path, layer: str) -> dict[str, np.ndarray]:
    """{pass name: float32 (H, W) or (H, W, C)} of one view layer of a multilayer EXR."""
    import OpenEXR

    passes: dict[str, dict[str, np.ndarray]] = {}
    for part in OpenEXR.File(str(path)).parts:
        for name, channel in part.channels.items():
            if not name.startswith(layer + "."):
                continue
            pass_name, _, component = name[len(layer) + 1:].partition(".")
            passes.setdefault(pass_name, {})[component] = np.asarray(channel.pixels, np.float32)
    out = {}
    for pass_name, parts in passes.items():
        if list(parts) == [""]:
            out[pass_name] = parts[""]
        else:   # separate components, in the order Blender names them
            order = sorted(parts, key=lambda c: "RGBAXYZV".find(c[:1]) if c[:1] in "RGBAXYZV" else 99)
            out[pass_name] = np.stack([parts[c] for c in order], axis=-1)
    return out


def _rgb(image: np.ndarray) -> np.ndarray:
    return image[..., :3] if image.ndim == 3 else np.repeat(image[..., None], 3, axis=-1)


def _scalar(image: np.ndarray) -> np.ndarray:
    return image[..., 0] if image.ndim == 3 else image


def to_frame(passes: dict[str, np.ndarray], camera_rotation: np.ndarray, index: int, timestamp: float,
             meta: dict) -> GBufferFrame:
    """The frame of one render; `camera_rotation` is the camera's 3x3 world rotation (columns = its axes)."""
    needed = ("Combined", "Depth", "Normal", "alaya_albedo", "alaya_roughness", "alaya_metallic")
    if missing := [p for p in needed if p not in passes]:
        raise GBufferError(f"the render has no {', '.join(missing)} pass(es)", f"frame {index}")
    z = _scalar(passes["Depth"])
    sky = ~np.isfinite(z) | (z >= BACKGROUND_Z)
    rgb = linear_to_srgb(_rgb(passes["Combined"]))
    albedo = np.where(sky[..., None], rgb, linear_to_srgb(_rgb(passes["alaya_albedo"])))
    world_normal = _rgb(passes["Normal"])
    view_normal = world_normal @ camera_rotation                 # n_view = Rᵀ n_world, row vectors
    view_normal /= np.maximum(np.linalg.norm(view_normal, axis=-1, keepdims=True), 1e-6)
    view_normal[sky] = (0.0, 0.0, 1.0)
    metallic = np.where(sky, 0.0, _scalar(passes["alaya_metallic"]))
    roughness = np.where(sky, 1.0, _scalar(passes["alaya_roughness"]))
    channels = {"albedo": albedo, "depth": encode_depth(np.where(sky, np.inf, z)),
                "metallic": encode_unit(metallic), "normal": encode_normal(view_normal),
                "roughness": encode_unit(roughness)}
    return replace(GBufferFrame.from_channels(index, timestamp, channels, meta), rgb=rgb)
