"""One channel image on disk or in memory → uint8 (H, W, 3): PNG (8/16-bit, grey or colour) and float EXR.

EXR holds physical values, turned into the 8-bit channel by the rules in `gbuffer.encoding`:
depth in metres (times `depth_scale` when the file uses another unit), normals in -1..1, metallic and
roughness in 0..1, albedo as linear colour (sRGB-encoded here).
"""

from __future__ import annotations

import io
from pathlib import Path

import av
import numpy as np
import OpenEXR
from PIL import Image

from gbuffer.encoding import encode_depth, encode_normal, encode_unit
from gbuffer.frame import GBufferError

# Channel names engines use for a single float depth layer, in order of preference (case-insensitive,
# matched against the last dotted component, so "ViewLayer.Depth.Z" counts as "z").
_DEPTH_NAMES = ("z", "depth", "distance", "y", "r", "v")


def encode_png(rgb: np.ndarray, compress_level: int = 1) -> bytes:
    """uint8 (H, W, 3), or (H, W) for a grey image → PNG bytes.

    FFmpeg's encoder with the "up" filter and deflate level 1: about half the CPU time of Pillow's adaptive
    filtering at the same size (bench/formats_bench.py); speed matters more than the last bytes.
    """
    codec = av.CodecContext.create("png", "w")
    codec.height, codec.width = rgb.shape[:2]
    codec.pix_fmt = "gray" if rgb.ndim == 2 else "rgb24"
    codec.options = {"pred": "up", "compression_level": str(compress_level)}
    packets = codec.encode(av.VideoFrame.from_ndarray(np.ascontiguousarray(rgb), format=codec.pix_fmt))
    return b"".join(bytes(p) for p in packets + codec.encode(None))


def decode_png(source: bytes | Path, where: str) -> np.ndarray:
    """PNG → uint8 (H, W, 3). 16-bit samples keep their high byte (>> 8); grey is repeated to RGB;
    alpha is dropped."""
    try:
        with Image.open(io.BytesIO(source) if isinstance(source, bytes) else source) as img:
            img.load()
            if img.format != "PNG":
                raise GBufferError(f"is a {img.format} image, expected PNG", where)
            return _to_rgb8(img)
    except (OSError, SyntaxError, ValueError, Image.DecompressionBombError) as exc:
        if isinstance(exc, GBufferError):
            raise
        raise GBufferError(f"not a readable PNG (truncated or corrupt?): {exc}", where) from None


def png_size(data: bytes) -> tuple[int, int] | None:
    """(width, height) from a PNG's IHDR chunk, read before anything is decoded (a small PNG may declare
    gigabytes of pixels); None when `data` does not start like a PNG (decode_png then says what it is)."""
    if len(data) < 24 or data[:8] != b"\x89PNG\r\n\x1a\n" or data[12:16] != b"IHDR":
        return None
    return int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")


def _to_rgb8(img: Image.Image) -> np.ndarray:
    if img.mode in ("I;16", "I;16B", "I;16L", "I"):  # 16-bit grey: Pillow keeps the full value
        grey = (np.asarray(img).astype(np.uint32) >> 8).astype(np.uint8)
    elif img.mode in ("L", "LA", "1"):
        grey = np.asarray(img.convert("L"))
    else:  # RGB, RGBA, P; Pillow already reduces 16-bit colour PNGs to their high byte
        return np.array(img.convert("RGB"))
    return np.repeat(grey[..., None], 3, axis=-1)


def read_exr(path: Path, channel: str, depth_scale: float = 1.0) -> np.ndarray:
    """Float EXR of one G-buffer channel → uint8 (H, W, 3); see the module docstring for the rules."""
    where = str(path)
    try:
        with OpenEXR.File(str(path), separate_channels=True) as exr:
            layers = {name: np.asarray(ch.pixels, np.float32) for name, ch in exr.channels().items()}
    except Exception as exc:  # OpenEXR raises bare RuntimeError / TypeError for unreadable files
        raise GBufferError(f"not a readable EXR (truncated or corrupt?): {exc}", where) from None
    if channel == "depth":
        return encode_depth(_pick_scalar(layers, where) * np.float32(depth_scale))
    if channel in ("metallic", "roughness"):
        return encode_unit(_pick_scalar(layers, where))
    rgb = _pick_rgb(layers, where)
    if channel == "normal":
        return encode_normal(rgb)
    return _linear_to_srgb8(rgb)  # albedo


def _short(name: str) -> str:
    return name.rsplit(".", 1)[-1].lower()


def _pick_scalar(layers: dict[str, np.ndarray], where: str) -> np.ndarray:
    by_short = {_short(n): a for n, a in layers.items()}
    for name in _DEPTH_NAMES:
        if name in by_short:
            return by_short[name]
    if len(layers) == 1:
        return next(iter(layers.values()))
    raise GBufferError(f"no depth/scalar layer among EXR channels {sorted(layers)}; "
                       f"expected one of {', '.join(n.upper() for n in _DEPTH_NAMES)}", where)


def _pick_rgb(layers: dict[str, np.ndarray], where: str) -> np.ndarray:
    by_short = {_short(n): a for n, a in layers.items()}
    if all(c in by_short for c in "rgb"):
        return np.stack([by_short[c] for c in "rgb"], axis=-1)
    if all(c in by_short for c in "xyz"):
        return np.stack([by_short[c] for c in "xyz"], axis=-1)
    raise GBufferError(f"no R, G, B (or X, Y, Z) layers among EXR channels {sorted(layers)}", where)


def _linear_to_srgb8(linear: np.ndarray) -> np.ndarray:
    x = np.clip(np.nan_to_num(linear, nan=0.0), 0.0, 1.0)
    srgb = np.where(x <= 0.0031308, 12.92 * x, 1.055 * np.power(x, 1 / 2.4) - 0.055)
    return np.round(srgb * 255.0).astype(np.uint8)
