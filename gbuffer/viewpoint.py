"""The camera a frame was drawn from, as recorded in `frame.meta["camera"]`, and the reprojection it allows.

Conventions (docs/formats.md, "Camera"):

- `view`: 4x4 world → camera matrix for column vectors (p_camera = view @ p_world); the camera looks down its
  −z axis with +y up and +x right (OpenGL).
- `projection`: 4x4 camera → clip matrix, OpenGL style (NDC x, y, z in −1..1 after the divide by w); NDC
  y = +1 is the image's top row and x = −1 its left column. Pixel (row i, column j) of an H x W image has its
  centre at NDC ((j + 0.5) / W · 2 − 1, 1 − (i + 0.5) / H · 2), whatever size the image is resized to.
- the G-buffer's depth channel is the distance along the camera axis (−z in camera space, gbuffer/encoding.py),
  so depth + camera give each pixel's world point.

The world is taken as static: a point seen at frame t−1 is where it was (a moving kart breaks that; both the
truth and every renderer are warped the same way, so comparisons stay fair).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from gbuffer.frame import GBufferError

CAMERA_KEY = "camera"
CONVENTION = "opengl"


@dataclass(frozen=True)
class Viewpoint:
    view: np.ndarray          # (4, 4) float64, world → camera
    projection: np.ndarray    # (4, 4) float64, camera → clip (OpenGL, NDC y up)

    def to_meta(self) -> dict[str, Any]:
        """What `frame.meta["camera"]` holds: plain JSON lists, row by row."""
        return {"view": np.asarray(self.view, np.float64).round(6).tolist(),
                "projection": np.asarray(self.projection, np.float64).round(6).tolist(),
                "convention": CONVENTION}

    @classmethod
    def from_meta(cls, meta: dict[str, Any], where: str = "frame") -> "Viewpoint | None":
        """The frame's camera, or None when the recording has none (recordings made before it was recorded)."""
        camera = meta.get(CAMERA_KEY) if isinstance(meta, dict) else None
        if camera is None:
            return None
        try:
            view = np.asarray(camera["view"], np.float64)
            projection = np.asarray(camera["projection"], np.float64)
        except (TypeError, KeyError, ValueError):
            raise GBufferError("camera metadata must hold 4x4 'view' and 'projection' matrices", where) from None
        if view.shape != (4, 4) or projection.shape != (4, 4) or not (np.isfinite(view).all()
                                                                      and np.isfinite(projection).all()):
            raise GBufferError("camera metadata must hold finite 4x4 'view' and 'projection' matrices", where)
        if camera.get("convention", CONVENTION) != CONVENTION:
            raise GBufferError(f"camera convention {camera.get('convention')!r} is not {CONVENTION!r}", where)
        return cls(view, projection)


def pixel_ndc(height: int, width: int) -> tuple[np.ndarray, np.ndarray]:
    """NDC x and y of every pixel centre, each (H, W)."""
    x = (np.arange(width) + 0.5) / width * 2 - 1
    y = 1 - (np.arange(height) + 0.5) / height * 2
    return np.broadcast_to(x[None, :], (height, width)), np.broadcast_to(y[:, None], (height, width))


def world_points(depth_m: np.ndarray, camera: Viewpoint) -> np.ndarray:
    """(H, W, 3) world positions of the pixels of a frame with this depth (metres along the axis) and camera."""
    h, w = depth_m.shape
    x, y = pixel_ndc(h, w)
    ndc = np.stack([x, y, np.ones_like(x), np.ones_like(x)], axis=-1)       # a point on each pixel's ray
    ray = ndc @ np.linalg.inv(camera.projection).T
    ray = ray[..., :3] / ray[..., 3:4]                                      # camera space, z < 0
    eye = ray * (depth_m[..., None] / -ray[..., 2:3])                       # scaled to the pixel's depth
    to_world = np.linalg.inv(camera.view)
    return eye @ to_world[:3, :3].T + to_world[:3, 3]


def project(points: np.ndarray, camera: Viewpoint) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """World points (..., 3) → (NDC x, NDC y, depth along the camera axis in metres) in that camera."""
    eye = points @ camera.view[:3, :3].T + camera.view[:3, 3]
    clip = eye @ camera.projection[:3, :3].T + camera.projection[:3, 3]
    w = eye @ camera.projection[3, :3] + camera.projection[3, 3]
    safe = np.where(np.abs(w) < 1e-9, 1e-9, w)
    return clip[..., 0] / safe, clip[..., 1] / safe, -eye[..., 2]
