"""What `record --rgb` stores for eval's regions and warp error: the sun mask (against a scene with a known
occluder, and in real recordings) and the camera of every frame (each pixel reprojects onto itself)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from gbuffer.encoding import decode_depth
from gbuffer.engine import beauty
from gbuffer.engine.camera import look_at
from gbuffer.engine.meshes import PLAIN, MeshBuilder
from gbuffer.engine.raster import GBufferRaster
from gbuffer.formats import open_sequence
from gbuffer.frame import CHANNEL_INDEX
from gbuffer.viewpoint import Viewpoint, pixel_ndc, project, world_points
from studio.cli import main

W, H = 64, 48
pytestmark = pytest.mark.gl


@pytest.fixture(scope="module")
def held(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("drive") / "held.gbuf.zip"
    assert main(["record", "--frames", "12", "--size", f"{W}x{H}", "--seed", "2", "--rgb", "--fps", "10",
                 "-o", str(out)]) == 0
    return out


def roof_scene() -> np.ndarray:
    """Flat ground at y = 0 and a 4 m x 4 m roof at y = 3 m over the origin (the known occluder)."""
    mb = MeshBuilder()
    for half, y in ((300.0, 0.0), (2.0, 3.0)):
        quad = np.array([(-half, y, -half), (half, y, -half), (half, y, half),
                         (-half, y, -half), (half, y, half), (-half, y, half)])
        mb.add(quad, (0.5, 0.5, 0.5), 0.0, 0.8, PLAIN)
    return mb.build()


def test_the_sun_mask_is_dark_exactly_under_a_known_occluder():
    raster = GBufferRaster(roof_scene(), 160, 120, beauty=True)
    try:
        view = look_at((0.0, 22.0, 9.0), (0.0, 0.0, -1.0))
        gbuffer, rgb, sun = raster.render_lit(view)
    finally:
        raster.close()
    depth = decode_depth(gbuffer[CHANNEL_INDEX["depth"]])
    points = world_points(depth.astype(np.float64), Viewpoint(view.astype(np.float64), raster.projection))
    ground = np.abs(points[..., 1]) < 0.3                       # the recorded depth and camera put it at y = 0
    assert ground.mean() > 0.5
    # the roof's shadow on the ground: the roof moved away from the sun down to y = 0
    d = beauty.SUN_DIRECTION
    shift = -d[[0, 2]] * 3.0 / d[1]
    offset = np.abs(points[..., [0, 2]] - shift)                 # per axis, from the shadow's centre
    inside = ground & (offset.max(axis=-1) < 2.0 - 0.4)
    outside = ground & (offset.max(axis=-1) > 2.0 + 0.4)
    assert inside.sum() > 50 and outside.sum() > 1000
    assert (sun[inside] < 128).mean() > 0.97
    assert (sun[outside] >= 128).mean() > 0.99
    # and the beauty pass is darker there: the mask is the shadow it drew
    luma = rgb.astype(float).mean(axis=-1)
    assert luma[inside].mean() < 0.7 * luma[outside].mean()


def test_record_rgb_stores_a_sun_mask_and_the_camera_of_every_frame(held):
    with open_sequence(held) as source:
        assert source.manifest.sun == "png-grey8" and source.has_sun
        frames = list(source)
    assert all(f.sun.shape == (H, W) and f.sun.dtype == np.uint8 for f in frames)
    assert any((f.sun < 128).any() for f in frames) and all((f.sun >= 128).any() for f in frames)
    cameras = [Viewpoint.from_meta(f.meta) for f in frames]
    # the recorded camera reprojects each pixel onto itself, at its own depth
    depth = decode_depth(frames[5].channel("depth")).astype(np.float64)
    x, y, z = project(world_points(depth, cameras[5]), cameras[5])
    nx, ny = pixel_ndc(H, W)
    assert np.allclose(x, nx, atol=1e-6) and np.allclose(y, ny, atol=1e-6) and np.allclose(z, depth, rtol=1e-6)
    assert not np.allclose(cameras[0].view, cameras[-1].view)        # the kart drove on
