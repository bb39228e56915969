"""Paired data: the engine's beauty pass, RGB beside the G-buffer in every recorded format and in the engine
feed, and one-line refusals of recordings whose RGB is missing, short or mis-sized (naming the frame)."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import numpy as np
import pytest

from gbuffer.engine import EngineSource
from gbuffer.engine.beauty import SUN_DIRECTION
from gbuffer.engine.camera import look_at
from gbuffer.engine.meshes import PLAIN, MeshBuilder
from gbuffer.engine.raster import GBufferRaster
from gbuffer.feed import FeedError, decode_frame, encode_frame, parse_hello
from gbuffer.feed.protocol import Hello
from gbuffer.formats import (ClipFolderSource, GbufZipSource, GbufZipWriter, NpyWindowsSource, open_sequence,
                             write_clip_folder, write_npy_windows)
from gbuffer.frame import GBufferError, GBufferFrame
from studio.cli import main

H, W = 32, 48


def paired_frames(rng: np.random.Generator, n: int, height: int = H, width: int = W) -> list[GBufferFrame]:
    return [GBufferFrame(i, i / 30, rng.integers(0, 256, (5, height, width, 3), dtype=np.uint8),
                         rgb=rng.integers(0, 256, (height, width, 3), dtype=np.uint8)) for i in range(n)]


def assert_pairs(source, frames: list[GBufferFrame]) -> None:
    assert source.paired and len(source) == len(frames)
    for frame in frames:
        got = source[frame.index]
        np.testing.assert_array_equal(got.data, frame.data)
        np.testing.assert_array_equal(got.rgb, frame.rgb)


# ---- the beauty pass --------------------------------------------------------------------------------------

def ground_with_roof(roof: bool) -> np.ndarray:
    """Flat ground; optionally a 6 m square roof hanging between the point (0, 0, -10) and the sun, out of the
    camera's view, so the G-buffer there is the same with or without it and only the light differs."""
    mb = MeshBuilder()
    g = 300.0
    mb.add(np.array([(-g, 0, -g), (g, 0, -g), (g, 0, g), (-g, 0, -g), (g, 0, g), (-g, 0, g)]), (0.6, 0.6, 0.6),
           0.0, 0.8, PLAIN)
    if roof:
        c = np.array([0.0, 0.0, -10.0]) + SUN_DIRECTION * (8.0 / SUN_DIRECTION[1])   # 8 m up along the sun ray
        x0, x1, z0, z1, y = c[0] - 3, c[0] + 3, c[2] - 3, c[2] + 3, c[1]
        mb.add(np.array([(x0, y, z0), (x1, y, z0), (x1, y, z1), (x0, y, z0), (x1, y, z1), (x0, y, z1)]),
               (0.5, 0.5, 0.5), 0.0, 0.8, PLAIN)
    return mb.build()


@pytest.mark.gl
def test_the_beauty_pass_holds_shadows_that_the_gbuffer_does_not():
    view = look_at((0.0, 2.0, 0.0), (0.0, 0.0, -10.0))      # the centre pixel sees the ground at (0, 0, -10)
    pairs = []
    for roof in (False, True):
        raster = GBufferRaster(ground_with_roof(roof), W, H, beauty=True)
        try:
            pairs.append(raster.render_pair(view))
        finally:
            raster.close()
    (g_open, rgb_open), (g_roof, rgb_roof) = pairs
    np.testing.assert_array_equal(g_open, g_roof)                    # the roof is out of view
    centre = (slice(H // 2 - 2, H // 2 + 2), slice(W // 2 - 2, W // 2 + 2))
    lit, shaded = rgb_open[centre].astype(float).mean(), rgb_roof[centre].astype(float).mean()
    assert shaded < 0.8 * lit, (lit, shaded)


@pytest.mark.gl
def test_engine_frames_carry_a_lit_image_with_a_sky_gradient_and_fog():
    with EngineSource.demo(64, 48, seed=1, rgb=True) as engine:
        frame = next(iter(engine))
    assert frame.rgb is not None and frame.rgb.shape == (48, 64, 3)
    sky = frame.data[1, :, :, 0] == 0                                 # depth 0 = sky
    assert sky[0].all(), "the camera sees sky along the top row"
    top = frame.rgb[0].astype(float).mean(axis=0)
    assert top[2] > top[0] + 20, f"the zenith is blue, got {top}"
    assert not np.array_equal(frame.rgb, frame.data[0]), "the lit image is not the albedo"
    with EngineSource.demo(64, 48, seed=1) as plain:
        g = next(iter(plain))
    assert g.rgb is None
    np.testing.assert_array_equal(g.data, frame.data)                # the beauty pass changes no G-buffer byte


@pytest.mark.gl
def test_raster_without_the_beauty_pass_refuses_render_pair():
    raster = GBufferRaster(ground_with_roof(False), 16, 16)
    try:
        with pytest.raises(GBufferError, match="built without the beauty pass"):
            raster.render_pair(look_at((0, 2, 0), (0, 0, -10)))
    finally:
        raster.close()


# ---- frames -----------------------------------------------------------------------------------------------

def test_a_frame_refuses_rgb_of_another_size_or_type(rng):
    data = rng.integers(0, 256, (5, H, W, 3), dtype=np.uint8)
    with pytest.raises(GBufferError, match=r"frame 7: rgb shape is \(32, 40, 3\), expected \(32, 48, 3\)"):
        GBufferFrame(7, 0.0, data, rgb=np.zeros((H, 40, 3), np.uint8))
    with pytest.raises(GBufferError, match="frame 7: rgb must be a uint8 array"):
        GBufferFrame(7, 0.0, data, rgb=np.zeros((H, W, 3), np.float32))


# ---- .gbuf.zip --------------------------------------------------------------------------------------------

def write_zip(path: Path, frames: list[GBufferFrame]) -> Path:
    with GbufZipWriter(path, fps=30) as writer:
        for f in frames:
            writer.write(f)
    return path


def test_gbuf_zip_round_trips_the_rgb_stream(tmp_path, rng):
    frames = paired_frames(rng, 4)
    path = write_zip(tmp_path / "p.gbuf.zip", frames)
    with zipfile.ZipFile(path) as z:
        assert "rgb/000003.png" in z.namelist()
        assert json.loads(z.read("manifest.json"))["rgb"] == "png-rgb8"
    with GbufZipSource(path) as source:
        assert_pairs(source, frames)


def test_gbuf_zip_without_rgb_is_unpaired_and_has_no_rgb_field(tmp_path, rng):
    frames = [GBufferFrame(f.index, f.timestamp, f.data) for f in paired_frames(rng, 2)]
    path = write_zip(tmp_path / "g.gbuf.zip", frames)
    with zipfile.ZipFile(path) as z:
        assert "rgb" not in json.loads(z.read("manifest.json"))
    with GbufZipSource(path) as source:
        assert not source.paired and source[1].rgb is None


def test_gbuf_zip_writer_refuses_a_half_paired_recording(tmp_path, rng):
    frames = paired_frames(rng, 3)
    frames[2] = GBufferFrame(2, 2 / 30, frames[2].data)
    with pytest.raises(GBufferError, match="frame 2 has no rgb image but frame 0 has one"):
        write_zip(tmp_path / "half.gbuf.zip", frames)
    assert not (tmp_path / "half.gbuf.zip").exists()


def rewrite(src: Path, dst: Path, drop: str | None = None, replace: dict[str, bytes] | None = None) -> Path:
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w") as zout:
        for name in zin.namelist():
            if name != drop:
                zout.writestr(name, (replace or {}).get(name, zin.read(name)))
    return dst


def test_gbuf_zip_with_missing_or_missized_rgb_is_refused_naming_the_frame(tmp_path, rng):
    from gbuffer.formats.imagefile import encode_png

    good = write_zip(tmp_path / "good.gbuf.zip", paired_frames(rng, 3))
    with pytest.raises(GBufferError, match=r"missing.gbuf.zip: frame 1 has no rgb image \(1 of 3 frames"):
        GbufZipSource(rewrite(good, tmp_path / "missing.gbuf.zip", drop="rgb/000001.png"))
    small = encode_png(np.zeros((H, W // 2, 3), np.uint8))
    source = GbufZipSource(rewrite(good, tmp_path / "small.gbuf.zip", replace={"rgb/000002.png": small}))
    with pytest.raises(GBufferError, match="frame 2: rgb image is 24x32, expected 48x32"):
        source[2]
    source.close()


# ---- .npy windows -----------------------------------------------------------------------------------------

def test_npy_windows_round_trip_their_rgb_siblings(tmp_path, rng):
    frames = paired_frames(rng, 5)
    written = write_npy_windows(frames, tmp_path, window=2)
    assert [p.name for p in sorted(tmp_path.glob("*.rgb.npy"))] == ["window-00.rgb.npy", "window-01.rgb.npy",
                                                                   "window-02.rgb.npy"]
    assert np.load(tmp_path / "window-02.rgb.npy").shape == (1, H, W, 3)
    with open_sequence(tmp_path) as source:               # the folder: siblings are not taken for windows
        assert isinstance(source, NpyWindowsSource) and len(source.windows) == 3
        assert_pairs(source, frames)
    with NpyWindowsSource(written) as source:
        assert_pairs(source, frames)


def test_npy_rgb_siblings_that_are_missing_short_or_missized_are_refused(tmp_path, rng):
    frames = paired_frames(rng, 6)
    windows = write_npy_windows(frames, tmp_path, window=3)
    sibling = tmp_path / "window-01.rgb.npy"
    full = np.load(sibling)
    np.save(sibling, full[:2])
    with pytest.raises(GBufferError, match=r"window-01.rgb.npy: frame 5 has no rgb image: 2 rgb frames for a "
                                           r"window of 3"):
        NpyWindowsSource(windows)
    np.save(sibling, full[:, :, :10])
    with pytest.raises(GBufferError, match=r"window-01.rgb.npy: shape is \(3, 32, 10, 3\), expected \(T, 32, 48, 3\)"):
        NpyWindowsSource(windows)
    sibling.unlink()
    with pytest.raises(GBufferError, match="window-01.npy: frame 3 has no rgb image: window-01.rgb.npy is missing"):
        NpyWindowsSource(windows)


# ---- clip folders -----------------------------------------------------------------------------------------

def test_clip_folders_round_trip_an_rgb_video(tmp_path, rng):
    frames = paired_frames(rng, 4)
    paths = write_clip_folder(frames, tmp_path / "clip", fps=30)
    assert paths["rgb"].name == "rgb.mp4"
    with open_sequence(tmp_path / "clip") as source:
        assert isinstance(source, ClipFolderSource)
        assert_pairs(source, frames)                      # lossless RGB H.264: bit-exact


def test_a_short_or_missized_rgb_video_is_refused(tmp_path, rng):
    frames = paired_frames(rng, 4)
    write_clip_folder(frames, tmp_path / "clip", fps=30)
    write_clip_folder(paired_frames(rng, 2), tmp_path / "short", fps=30)
    (tmp_path / "clip" / "rgb.mp4").write_bytes((tmp_path / "short" / "rgb.mp4").read_bytes())
    with pytest.raises(GBufferError, match="rgb.mp4: frame 2 has no rgb image: the rgb video has 2 frames"):
        ClipFolderSource(tmp_path / "clip")
    write_clip_folder(paired_frames(rng, 4, H, 32), tmp_path / "narrow", fps=30)
    (tmp_path / "clip" / "rgb.mp4").write_bytes((tmp_path / "narrow" / "rgb.mp4").read_bytes())
    with pytest.raises(GBufferError, match="rgb.mp4: rgb video is 32x32 but the channels are 48x32"):
        ClipFolderSource(tmp_path / "clip")


# ---- engine feed ------------------------------------------------------------------------------------------

def hello_text(**fields) -> str:
    return json.dumps({"type": "hello", "protocol": 1, "name": "kart", "width": W, "height": H, "fps": 30,
                       **fields})


@pytest.mark.parametrize("compression", ["none", "zlib"])
def test_a_paired_feed_carries_rgb_with_each_frame(rng, compression):
    hello = parse_hello(hello_text(rgb=True, compression=compression))
    assert hello.rgb and hello.frame_bytes == 6 * H * W * 3
    frame = paired_frames(rng, 1)[0]
    back = decode_frame(encode_frame(frame, compression, rgb=True), hello)
    np.testing.assert_array_equal(back.data, frame.data)
    np.testing.assert_array_equal(back.rgb, frame.rgb)
    assert json.loads(hello.to_json())["rgb"] is True


def test_a_paired_feed_refuses_frames_without_their_rgb(rng):
    hello = parse_hello(hello_text(rgb=True))
    frame = paired_frames(rng, 1)[0]
    unpaired = encode_frame(frame, "none")                  # G-buffer only
    with pytest.raises(FeedError, match=r"frame 0: payload has 23040 bytes; a 48x32 frame with its rgb image"):
        decode_frame(unpaired, hello)
    with pytest.raises(FeedError, match="frame 3 has no rgb image but the hello said rgb"):
        encode_frame(GBufferFrame(3, 0.1, frame.data), "none", rgb=True)
    with pytest.raises(FeedError, match=r"hello\.rgb: Input should be a valid boolean"):
        parse_hello(hello_text(rgb="yes"))


def test_an_unpaired_hello_is_unchanged_on_the_wire():
    hello = Hello("kart", W, H, 30.0)
    assert not hello.rgb and hello.frame_bytes == 5 * H * W * 3


# ---- record --rgb -----------------------------------------------------------------------------------------

@pytest.mark.gl
def test_record_rgb_stores_the_beauty_pass_beside_the_gbuffer(tmp_path):
    out = tmp_path / "pairs.gbuf.zip"
    assert main(["record", "--frames", "3", "--size", "48x32", "--seed", "2", "--rgb", "-o", str(out)]) == 0
    with EngineSource.demo(48, 32, seed=2, rgb=True) as engine:
        expected = [next(iter(engine)) for _ in range(3)]
    with GbufZipSource(out) as source:
        assert source.paired and source.metadata["rgb"] is True
        for i in range(3):
            np.testing.assert_array_equal(source[i].rgb, expected[i].rgb)
    windows = tmp_path / "windows"
    assert main(["record", "--frames", "3", "--size", "48x32", "--rgb", "-o", f"{windows}/"]) == 0
    assert (windows / "window-00.rgb.npy").is_file()
    with open_sequence(windows) as source:
        assert len(source) == 3 and source.paired
