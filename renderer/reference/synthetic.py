"""A small ray-cast G-buffer scene (a road on a floor, boxes, a wall, sky), for tests and benchmarks that must
not depend on the game engine. Encoded with the gbuffer.encoding rules, so it is a faithful G-buffer.

The camera sits 1.5 m above the floor looking down -z (view space = world space shifted by the camera), with
`VERTICAL_FOV_DEG` like the reference renderer assumes; `t` (seconds) moves it forward at 4 m/s.
"""

from __future__ import annotations

import numpy as np

from gbuffer.encoding import encode_depth, encode_normal, encode_unit
from gbuffer.frame import GBufferFrame

VERTICAL_FOV_DEG = 60.0
CAMERA_HEIGHT_M = 1.5
SPEED_M_S = 4.0

# (min corner, max corner) in metres, world space; albedo sRGB 0..1, metallic, roughness
_BOXES = (
    ((2.0, 0.0, -14.0), (4.0, 2.0, -10.0), (0.75, 0.2, 0.15), 0.0, 0.7),
    ((-3.2, 0.0, -24.0), (-1.8, 1.2, -21.0), (0.8, 0.75, 0.7), 1.0, 0.25),
    ((1.0, 0.0, -40.0), (6.0, 6.0, -32.0), (0.3, 0.5, 0.7), 0.0, 0.5),
    ((-2.5, 0.0, -70.0), (2.5, 10.0, -60.0), (0.55, 0.55, 0.5), 0.2, 0.6),
)
_WALL_X = -5.0  # a long wall on the left, facing +x


def synthetic_gbuffer(width: int = 416, height: int = 224, t: float = 0.0, index: int = 0) -> GBufferFrame:
    cam_z = -SPEED_M_S * t
    tan_half = np.tan(np.radians(VERTICAL_FOV_DEG) / 2)
    ys = (1 - (np.arange(height) + 0.5) / height * 2) * tan_half
    xs = ((np.arange(width) + 0.5) / width * 2 - 1) * tan_half * width / height
    dx, dy = np.meshgrid(xs, ys)
    dz = -np.ones_like(dx)  # ray direction with unit forward component: hit distance t == view depth
    origin = np.array([0.0, CAMERA_HEIGHT_M, cam_z])

    depth = np.full(dx.shape, np.inf)
    normal = np.zeros(dx.shape + (3,))
    albedo = np.zeros(dx.shape + (3,))
    metal = np.zeros(dx.shape)
    rough = np.ones(dx.shape)

    def hit(t_hit, n, col, m, r):
        closer = np.isfinite(t_hit) & (t_hit > 0) & (t_hit < depth)
        depth[closer] = t_hit[closer]
        normal[closer] = n[closer] if np.ndim(n) == 3 else n
        albedo[closer] = col[closer] if np.ndim(col) == 3 else col
        metal[closer] = m
        rough[closer] = r

    with np.errstate(divide="ignore", invalid="ignore"):
        t_floor = np.where(dy < 0, -CAMERA_HEIGHT_M / dy, np.inf)
        wx, wz = dx * t_floor, origin[2] + dz * t_floor
        road = np.abs(wx) < 2.5
        stripe = (np.abs(wx) < 0.1) & (np.mod(wz, 6.0) < 3.0)
        checker = (np.floor(wx / 2) + np.floor(wz / 2)) % 2
        floor_col = np.where(road[..., None], [0.3, 0.3, 0.32], np.where(
            checker[..., None] > 0, [0.35, 0.55, 0.25], [0.3, 0.48, 0.2]))
        floor_col = np.where(stripe[..., None], [0.9, 0.9, 0.85], floor_col)
        hit(t_floor, np.array([0.0, 1.0, 0.0]), floor_col, 0.0, 0.85)

        t_wall = np.where(dx < 0, (_WALL_X - origin[0]) / dx, np.inf)
        wall_y = origin[1] + dy * t_wall
        t_wall = np.where((wall_y >= 0) & (wall_y <= 3.0), t_wall, np.inf)
        bricks = (np.floor(wall_y / 0.25) + np.floor((origin[2] + dz * t_wall) / 0.5)) % 2
        hit(t_wall, np.array([1.0, 0.0, 0.0]), np.where(bricks[..., None] > 0, [0.6, 0.35, 0.25],
                                                           [0.5, 0.3, 0.2]), 0.0, 0.9)

        d = np.stack([dx, dy, dz], -1)
        for lo, hi, col, m, r in _BOXES:
            lo, hi = np.array(lo) - origin, np.array(hi) - origin
            t0, t1 = lo / d, hi / d
            tmin, tmax = np.minimum(t0, t1), np.maximum(t0, t1)
            t_near, t_far = tmin.max(-1), tmax.min(-1)
            t_box = np.where((t_near <= t_far) & (t_near > 0), t_near, np.inf)
            axis = tmin.argmax(-1)
            n = -np.sign(np.take_along_axis(d, axis[..., None], -1)) * np.eye(3)[axis]
            hit(t_box, n, np.array(col), m, r)

    sky = ~np.isfinite(depth)
    albedo[sky] = (0.5, 0.7, 1.0)
    normal[sky] = (0.0, 0.0, 1.0)
    channels = {
        "albedo": np.round(albedo * 255).astype(np.uint8),
        "depth": encode_depth(depth),
        "metallic": encode_unit(metal),
        "normal": encode_normal(normal),
        "roughness": encode_unit(rough),
    }
    return GBufferFrame.from_channels(index, t, channels, {"source": "synthetic"})
