"""Decode a G-buffer frame into the physical surface quantities the shader works with (torch, C×H×W).

The rules are gbuffer.encoding's: depth goes through a 256-entry table built with `decode_depth` itself,
normals follow `decode_normal`, albedo is sRGB and is linearised here.
View-space geometry (positions, view vectors) assumes a pinhole camera with `VERTICAL_FOV_DEG`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from gbuffer.encoding import decode_depth
from gbuffer.frame import CHANNEL_INDEX

# A chase camera's usual field of view; only caustics, haze and the sky gradient depend on it.
VERTICAL_FOV_DEG = 60.0

_DEPTH_LUT = torch.from_numpy(decode_depth(np.arange(256, dtype=np.uint8)))  # (256,) metres


@dataclass
class Surface:
    """One decoded frame. Shapes: (3, H, W) for colours and vectors, (1, H, W) for scalars."""

    albedo: torch.Tensor      # linear RGB 0..1
    depth_m: torch.Tensor     # view-space distance along the camera axis, metres
    log_depth: torch.Tensor   # the stored 0..1 value: 1 near, 0 far/sky (for edge detection)
    sky: torch.Tensor         # bool, no geometry
    metallic: torch.Tensor    # 0..1
    roughness: torch.Tensor   # 0..1
    normal: torch.Tensor      # unit, view space (x right, y up, z towards the camera)
    position: torch.Tensor    # view-space point, metres (camera at the origin looking down -z)
    view: torch.Tensor        # unit vector from the surface towards the camera (sky: towards the viewer)


def dot(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Per-pixel dot product of (3, H, W) vector fields (or a (3, 1, 1) vector) → (1, H, W)."""
    return (a * b).sum(0, keepdim=True)


def along(field: torch.Tensor, direction: torch.Tensor) -> torch.Tensor:
    """(3, H, W) vector field · one (3, 1, 1) direction → (1, H, W), as a single matrix product."""
    return (direction.view(1, 3) @ field.reshape(3, -1)).view(1, *field.shape[1:])


def srgb_to_linear(c: torch.Tensor) -> torch.Tensor:
    return torch.where(c <= 0.04045, c / 12.92, ((c + 0.055) / 1.055) ** 2.4)


# The linear value of each stored 8-bit sRGB level: albedo is decoded by table, here and in the GL shaders.
SRGB_LUT = srgb_to_linear(torch.arange(256, dtype=torch.float32) / 255.0)


def linear_to_srgb(c: torch.Tensor) -> torch.Tensor:
    c = c.clamp(0.0, 1.0)
    return torch.where(c <= 0.0031308, c * 12.92, 1.055 * c.clamp_min(1e-8) ** (1 / 2.4) - 0.055)


def frame_to_tensor(data: np.ndarray, height: int, width: int, device: torch.device) -> torch.Tensor:
    """uint8 (5, H, W, 3) → uint8 (5, 3, height, width) on `device`, resized if needed:
    albedo bilinearly, the geometric channels by nearest neighbour (interpolating normals or depth across an
    edge would invent surfaces that are not there)."""
    t = torch.from_numpy(np.ascontiguousarray(data)).to(device).permute(0, 3, 1, 2)  # (5, 3, H, W)
    if t.shape[-2:] == (height, width):
        return t.contiguous()
    out = F.interpolate(t.float(), size=(height, width), mode="nearest")
    a = CHANNEL_INDEX["albedo"]
    out[a] = F.interpolate(t[a:a + 1].float(), size=(height, width), mode="bilinear",
                           align_corners=False, antialias=True)[0]
    return out.round().clamp(0, 255).to(torch.uint8)


class SurfaceDecoder:
    """Per-session: caches the camera rays for one resolution and device."""

    def __init__(self, height: int, width: int, device: torch.device):
        self.height, self.width, self.device = height, width, device
        self.depth_lut = _DEPTH_LUT.to(device)
        self.srgb_lut = SRGB_LUT.to(device)
        tan_half = math.tan(math.radians(VERTICAL_FOV_DEG) / 2)
        ys = (1 - (torch.arange(height, device=device) + 0.5) / height * 2) * tan_half
        xs = ((torch.arange(width, device=device) + 0.5) / width * 2 - 1) * tan_half * width / height
        gy, gx = torch.meshgrid(ys, xs, indexing="ij")
        self.ray = torch.stack([gx, gy, -torch.ones_like(gx)])  # (3, H, W), forward component −1
        self.view = -self.ray / self.ray.norm(dim=0, keepdim=True)

    def decode(self, data: np.ndarray) -> Surface:
        g = frame_to_tensor(data, self.height, self.width, self.device)  # uint8 (5, 3, H, W)
        c = CHANNEL_INDEX
        depth_u8 = g[c["depth"], :1]
        depth_m = self.depth_lut[depth_u8.long()]
        n = g[c["normal"]].float().mul_(1 / 127.5).sub_(1.0)
        n = n * torch.rsqrt(n.square().sum(0, keepdim=True).clamp_min(1e-12))
        return Surface(
            albedo=self.srgb_lut[g[c["albedo"]].long()],
            depth_m=depth_m,
            log_depth=depth_u8.float() / 255.0,
            sky=depth_u8 == 0,
            metallic=g[c["metallic"], :1].float() / 255.0,
            roughness=g[c["roughness"], :1].float() / 255.0,
            normal=n,
            position=self.ray * depth_m,
            view=self.view,
        )
