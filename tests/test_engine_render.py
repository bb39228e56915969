"""Built-in engine rendering: the one-pass G-buffer matches gbuffer/encoding.py, and EngineSource frames."""

from __future__ import annotations

import math
from itertools import islice

import numpy as np
import pytest

from gbuffer.encoding import decode_normal, encode_depth, encode_normal, encode_unit
from gbuffer.engine import EngineError, EngineSource
from gbuffer.engine.camera import look_at
from gbuffer.engine.meshes import PLAIN, MeshBuilder
from gbuffer.engine.raster import FOV_Y_DEG, SKY_ALBEDO, GBufferRaster
from gbuffer.frame import CHANNEL_INDEX
from gbuffer.input import PlayerInput

pytestmark = pytest.mark.gl

W, H = 96, 64
ALBEDO, DEPTH, METALLIC, NORMAL, ROUGHNESS = (CHANNEL_INDEX[c] for c in
                                              ("albedo", "depth", "metallic", "normal", "roughness"))


def plane_scene(metallic: float = 0.25, roughness: float = 0.6) -> np.ndarray:
    """A 800 m square of flat ground at y = 0 and a wall facing +z at z = -10 m, x in [20, 40]."""
    mb = MeshBuilder()
    g = 400.0
    ground = np.array([(-g, 0, -g), (g, 0, -g), (g, 0, g), (-g, 0, -g), (g, 0, g), (-g, 0, g)])
    mb.add(ground, (0.5, 0.4, 0.3), metallic, roughness, PLAIN)
    wall = np.array([(20, 0, -10), (40, 0, -10), (40, 30, -10), (20, 0, -10), (40, 30, -10), (20, 30, -10)])
    mb.add(wall, (0.2, 0.3, 0.9), 1.0, 0.1, PLAIN, outward_from=(30, 15, -20))
    return mb.build()


@pytest.fixture(scope="module")
def plane_raster():
    raster = GBufferRaster(plane_scene(), W, H)
    yield raster
    raster.close()


def test_flat_ground_depth_and_normal_follow_the_encoding(plane_raster):
    eye_height = 2.0
    gb = plane_raster.render(look_at((0, eye_height, 0), (0, eye_height, -1)))
    tan_half = math.tan(math.radians(FOV_Y_DEG) / 2)
    column = gb[:, :, W // 4]  # left of the wall: only ground and sky
    checked = 0
    for row in range(H):
        y_ndc = 1.0 - 2.0 * (row + 0.5) / H  # row 0 is the top of the image
        if y_ndc > 0:
            assert column[DEPTH, row, 0] == 0, f"row {row} above the horizon is not sky"
            continue
        distance = eye_height / (-y_ndc * tan_half)  # along the camera axis, metres
        if distance > 300:  # near the horizon, where the 400 m plane ends
            continue
        expected = int(encode_depth(np.array(distance))[0])
        assert abs(int(column[DEPTH, row, 0]) - expected) <= 1, f"row {row}: {distance:.2f} m"
        assert np.abs(column[NORMAL, row].astype(int) - encode_normal(np.array([0.0, 1.0, 0.0]))).max() <= 1
        checked += 1
    assert checked >= H // 3
    ground = gb[:, -1, W // 4]
    assert abs(int(ground[METALLIC, 0]) - int(encode_unit(0.25)[0])) <= 1
    assert abs(int(ground[ROUGHNESS, 0]) - int(encode_unit(0.6)[0])) <= 1


def test_view_space_normal_of_ground_seen_from_above(plane_raster):
    pitch = math.atan2(2.0, 10.0)
    gb = plane_raster.render(look_at((0, 2, 0), (0, 0, -10)))
    n = decode_normal(gb[NORMAL, -5:, : W // 4]).reshape(-1, 3).mean(axis=0)
    # Up, seen by a camera pitched down by `pitch`, tilts towards the camera (+z in view space).
    assert np.allclose(n, [0.0, math.cos(pitch), math.sin(pitch)], atol=0.01)


def test_wall_facing_the_camera(plane_raster):
    gb = plane_raster.render(look_at((30, 5, 0), (30, 5, -1)))
    centre = gb[:, H // 2 - 4: H // 2 + 4, W // 2 - 4: W // 2 + 4]
    assert np.abs(centre[DEPTH].astype(int) - int(encode_depth(np.array(10.0))[0])).max() <= 1
    assert np.abs(centre[NORMAL].astype(int) - encode_normal(np.array([0.0, 0.0, 1.0]))).max() <= 1
    assert np.all(centre[METALLIC] == 255)
    assert np.abs(centre[ALBEDO].astype(int) - np.round(np.array([0.2, 0.3, 0.9]) * 255)).max() <= 1


def test_sky_has_depth_zero_and_sky_values(plane_raster):
    gb = plane_raster.render(look_at((0, 2, 0), (0, 3, -1)))  # looking up: the top rows are sky
    top = gb[:, 0]
    assert np.all(top[DEPTH] == 0)
    assert np.abs(top[ALBEDO].astype(int) - np.round(np.array(SKY_ALBEDO) * 255)).max() <= 1
    assert np.all(top[NORMAL] == encode_normal(np.array([0.0, 0.0, 1.0])))


def frames_of(source: EngineSource, inputs) -> list:
    frames = []
    for control in inputs:
        source.apply_input(control)
        frames.append(source.next_frame())
    return frames


def test_engine_frames_are_deterministic_and_seeded():
    inputs = [PlayerInput(steer=0.3 * math.sin(i), throttle=1.0) for i in range(6)]
    with EngineSource(W, H, seed=7, autopilot=False) as a, EngineSource(W, H, seed=7, autopilot=False) as b, \
            EngineSource(W, H, seed=8, autopilot=False) as c:
        fa, fb, fc = frames_of(a, inputs), frames_of(b, inputs), frames_of(c, inputs)
    assert all(x.data.tobytes() == y.data.tobytes() and x.meta == y.meta for x, y in zip(fa, fb))
    assert fa[-1].data.tobytes() != fc[-1].data.tobytes()
    assert fa[0].data.tobytes() != fa[-1].data.tobytes()  # the kart moved


def test_engine_source_frames_have_sane_content():
    with EngineSource.demo(160, 96, fps=30, seed=0) as src:
        frames = list(islice(src, 20))  # iteration is unbounded; take what we need
    f = frames[-1]
    assert [x.index for x in frames] == list(range(20))
    assert frames[10].timestamp == pytest.approx(10 / 30)
    assert f.data.shape == (5, 96, 160, 3)
    assert f.meta["tick"] == 40 and f.meta["autopilot"] and f.meta["on_track"] and f.meta["speed"] > 3
    assert set(f.meta) >= {"position", "speed", "lap", "on_track"}
    depth = f.channel("depth")[..., 0]
    assert (depth[:10] == 0).any()  # sky at the top
    assert (depth > 0).mean() > 0.5 and depth[depth > 0].std() > 10  # ground with varying distance
    bottom = decode_normal(f.channel("normal")[-4:, 40:120])
    assert np.median(bottom[..., 1]) > 0.8  # the road ahead of the kart faces up
    assert (f.channel("metallic") > 128).any()  # the kart's body
    assert f.channel("albedo").reshape(-1, 3).std(axis=0).min() > 10
    assert len(np.unique(f.channel("roughness"))) > 5


def test_frames_advance_physics_ticks_at_any_fps():
    with EngineSource(32, 24, fps=24, seed=0) as src:
        frames = list(islice(src, 24))
        src.close()
        src.close()  # closing twice is fine
    assert frames[-1].meta["tick"] == 60  # one second of 60 Hz physics


@pytest.mark.parametrize("kwargs, message", [
    (dict(width=0, height=64), "size 0x64"),
    (dict(width=64, height=5000), "size 64x5000"),
    (dict(width=64.5, height=64), "whole pixel counts"),
    (dict(fps=0), "fps 0"),
    (dict(fps=120), "fps 120"),
    (dict(seed=-1), "seed must be a whole number"),
    (dict(seed="x"), "seed must be a whole number"),
])
def test_bad_engine_options_are_one_line_errors(kwargs, message):
    with pytest.raises(EngineError, match=message):
        EngineSource(**kwargs)


def test_view_culling_never_drops_visible_geometry():
    from gbuffer.engine.raster import kart_model_matrix

    with EngineSource(W, H, seed=3) as src:
        for _ in range(30):
            frame = src.next_frame()
        raster, s = src._raster, src.sim.physics.state
        view, kart = src.sim.camera.view_matrix(), kart_model_matrix(s.x, s.y, s.z, s.heading, s.pitch, s.roll)
        culled = raster.render(view, kart)
        assert np.array_equal(culled, frame.data)
        assert len(raster._visible_sectors(view)) < len(raster._sectors)  # something was culled
        raster._visible_sectors = lambda view: raster._sectors  # draw everything
        everything = raster.render(view, kart)
    # Only pixels where two surfaces tie in depth may differ (draw order changed).
    assert (culled != everything).any(axis=(0, 3)).mean() < 0.002

