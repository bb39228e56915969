"""Recorded G-buffer formats: each reader round-trips against its writer or a fixture written here,
supports random access and seek, and rejects bad input with a one-line GBufferError naming the file."""

from __future__ import annotations

import json
import zipfile
from dataclasses import asdict
from pathlib import Path

import av
import numpy as np
import OpenEXR
import pytest
from PIL import Image

from gbuffer.encoding import encode_depth
from gbuffer.formats import (
    DEFAULT_FPS,
    ClipFolderSource,
    GbufZipSource,
    GbufZipWriter,
    ImageFolderSource,
    NpyWindowsSource,
    open_sequence,
    write_clip_folder,
    write_image_folder,
    write_npy_windows,
)
from gbuffer.frame import CHANNELS, GBufferError, GBufferFrame
from gbuffer.input import PlayerInput

H, W = 48, 64


def make_frames(rng: np.random.Generator, n: int, height: int = H, width: int = W) -> list[GBufferFrame]:
    """Noise frames: any lossy step or channel mix-up shows as a mismatch."""
    return [GBufferFrame(i, i / 30, rng.integers(0, 256, (5, height, width, 3), dtype=np.uint8))
            for i in range(n)]


def assert_same_frames(source, frames: list[GBufferFrame]) -> None:
    assert len(source) == len(frames)
    for frame in frames:
        np.testing.assert_array_equal(source[frame.index].data, frame.data)


def one_line(exc: pytest.ExceptionInfo) -> str:
    message = str(exc.value)
    assert "\n" not in message
    return message


# --- official .npy windows -------------------------------------------------------------------------------


def test_npy_windows_round_trip_in_order(tmp_path, rng):
    frames = make_frames(rng, 37)
    paths = write_npy_windows(frames, tmp_path, window=16)
    assert [p.name for p in paths] == ["window-00.npy", "window-01.npy", "window-02.npy"]
    assert [np.load(p, mmap_mode="r").shape[0] for p in paths] == [16, 16, 5]  # last window is the rest
    with NpyWindowsSource(paths) as source:
        assert (source.width, source.height, source.fps) == (W, H, DEFAULT_FPS)
        assert_same_frames(source, frames)
        assert [f.index for f in source] == list(range(37))
        assert source[20].timestamp == pytest.approx(20 / DEFAULT_FPS)


def test_npy_windows_are_memory_mapped_and_frames_are_copies(tmp_path, rng):
    paths = write_npy_windows(make_frames(rng, 6), tmp_path, window=4)
    source = NpyWindowsSource(paths)
    assert all(isinstance(w, np.memmap) for w in source.windows)
    frame = source[5]
    assert not isinstance(frame.data, np.memmap) and frame.data.flags.writeable
    frame.data[:] = 0  # must not write through to the file
    assert source[5].data.any()


def test_npy_random_access_and_seek(tmp_path, rng):
    frames = make_frames(rng, 10)
    source = NpyWindowsSource(write_npy_windows(frames, tmp_path, window=3))
    for i in (9, 0, 4, 3, 7):
        np.testing.assert_array_equal(source[i].data, frames[i].data)
    np.testing.assert_array_equal(source[-1].data, frames[9].data)
    source.seek(6)
    assert [f.index for f in source] == [6, 7, 8, 9]
    with pytest.raises(GBufferError, match="out of range"):
        source[10]


@pytest.mark.parametrize("array, problem", [
    (np.zeros((2, 5, H, W, 3), np.float32), "dtype is float32, expected uint8"),
    (np.zeros((2, 4, H, W, 3), np.uint8), r"shape is \(2, 4, 48, 64, 3\), expected \(T, 5, H, W, 3\)"),
    (np.zeros((2, 5, H, W, 4), np.uint8), r"shape is \(2, 5, 48, 64, 4\)"),
    (np.zeros((5, H, W, 3), np.uint8), r"shape is \(5, 48, 64, 3\)"),
    (np.zeros((0, 5, H, W, 3), np.uint8), "window has no frames"),
])
def test_npy_bad_arrays_name_file_and_problem(tmp_path, array, problem):
    path = tmp_path / "bad.npy"
    np.save(path, array)
    with pytest.raises(GBufferError, match=problem) as exc:
        NpyWindowsSource([path])
    assert "bad.npy" in one_line(exc)


def test_npy_truncated_corrupt_and_missing_files(tmp_path, rng):
    (good,) = write_npy_windows(make_frames(rng, 2), tmp_path, window=2)
    truncated = tmp_path / "truncated.npy"
    truncated.write_bytes(good.read_bytes()[:-1000])
    garbage = tmp_path / "garbage.npy"
    garbage.write_text("this is not numpy")
    archive = tmp_path / "pack.npy"
    with open(archive, "wb") as f:
        np.savez(f, a=np.zeros(3))
    for path, problem in [(truncated, "truncated or corrupt"),
                          (garbage, r"not a G-buffer window \(expected a uint8 array \(T, 5, H, W, 3\)\)"),
                          (archive, "npz"), (tmp_path / "absent.npy", "not found")]:
        with pytest.raises(GBufferError, match=problem) as exc:
            NpyWindowsSource([path])
        assert path.name in one_line(exc)


def test_npy_windows_of_different_sizes_are_refused(tmp_path, rng):
    a = write_npy_windows(make_frames(rng, 2), tmp_path / "a")
    b = write_npy_windows(make_frames(rng, 2, height=32), tmp_path / "b")
    with pytest.raises(GBufferError, match="window is 64x32 but the sequence is 64x48"):
        NpyWindowsSource(a + b)


def test_write_npy_windows_rejects_bad_requests(tmp_path, rng):
    with pytest.raises(GBufferError, match="no frames to write"):
        write_npy_windows([], tmp_path)
    with pytest.raises(GBufferError, match="window must be a positive"):
        write_npy_windows(make_frames(rng, 2), tmp_path, window=0)
    mixed = make_frames(rng, 1) + make_frames(rng, 1, height=32)
    with pytest.raises(GBufferError, match="frame 0 is 64x32"):
        write_npy_windows(mixed, tmp_path / "mixed")


# --- .gbuf.zip ---------------------------------------------------------------------------------------------


def record(path: Path, frames: list[GBufferFrame], **kwargs) -> Path:
    with GbufZipWriter(path, fps=kwargs.pop("fps", 30.0), **kwargs) as writer:
        for frame in frames:
            writer.write(frame)
    return path


def test_gbuf_zip_round_trip_is_lossless_with_metadata(tmp_path, rng):
    frames = make_frames(rng, 5)
    frames[2].meta = {"lap": np.int64(1), "kart": {"speed": np.float32(12.5)}, "input": PlayerInput(steer=0.5)}
    frames[3].timestamp = 0.123
    path = record(tmp_path / "run.gbuf.zip", frames, fps=24.0, source="engine demo",
                  metadata={"seed": 7})
    with GbufZipSource(path) as source:
        assert (source.width, source.height, source.fps, len(source)) == (W, H, 24.0, 5)
        assert (source.source, source.metadata) == ("engine demo", {"seed": 7})
        for i in (4, 0, 2, 3, 1):
            np.testing.assert_array_equal(source[i].data, frames[i].data)
        assert source[2].meta == {"lap": 1, "kart": {"speed": 12.5}, "input": asdict(PlayerInput(steer=0.5))}
        assert source[3].timestamp == 0.123 and source[1].meta == {}
    with GbufZipSource(path, fps=10) as retimed:
        assert retimed.fps == 10 and retimed[3].timestamp == pytest.approx(0.3)


def test_gbuf_zip_layout_and_manifest(tmp_path, rng):
    path = record(tmp_path / "run.gbuf.zip", make_frames(rng, 3), source="test")
    with zipfile.ZipFile(path) as archive:
        names = archive.namelist()
        assert names[-1] == "manifest.json"  # written last, after every frame
        assert {"frames/000000.png", "frames/000002.png"} <= set(names)
        assert all(i.compress_type == zipfile.ZIP_STORED for i in archive.infolist())
        manifest = json.loads(archive.read("manifest.json"))
        stacked = np.asarray(Image.open(archive.open("frames/000001.png")))
    assert manifest["format"] == "alaya-gbuf" and manifest["version"] == 1
    assert (manifest["width"], manifest["height"], manifest["fps"], manifest["frame_count"]) == (W, H, 30.0, 3)
    assert manifest["channels"] == list(CHANNELS) and manifest["source"] == "test"
    assert stacked.shape == (5 * H, W, 3)  # channels stacked vertically


def test_gbuf_zip_is_only_in_place_after_close(tmp_path, rng):
    path = tmp_path / "run.gbuf.zip"
    writer = GbufZipWriter(path, fps=30)
    for frame in make_frames(rng, 2):
        writer.write(frame)
    assert writer.frames_written == 2 and not path.exists()
    writer.close()
    assert path.exists() and not (tmp_path / "run.gbuf.zip.tmp").exists()


def test_gbuf_zip_interrupted_write_leaves_nothing(tmp_path, rng):
    path = tmp_path / "run.gbuf.zip"
    with pytest.raises(RuntimeError):
        with GbufZipWriter(path, fps=30) as writer:
            writer.write(make_frames(rng, 1)[0])
            raise RuntimeError("engine crashed")
    assert list(tmp_path.iterdir()) == []


def test_gbuf_zip_writer_rejects_bad_input(tmp_path, rng):
    path = tmp_path / "run.gbuf.zip"
    with GbufZipWriter(path, fps=30) as writer:
        writer.write(make_frames(rng, 1)[0])
        with pytest.raises(GBufferError, match="frame 0 is 64x32 but the sequence is 64x48"):
            writer.write(make_frames(rng, 1, height=32)[0])
    with pytest.raises(GBufferError, match="no frames were written"):
        GbufZipWriter(tmp_path / "empty.gbuf.zip", fps=30).close()
    assert not (tmp_path / "empty.gbuf.zip").exists()
    with pytest.raises(GBufferError, match="fps must be a positive number"):
        GbufZipWriter(tmp_path / "x.gbuf.zip", fps=0)
    with pytest.raises(GBufferError, match="metadata cannot be stored as JSON"):
        GbufZipWriter(tmp_path / "x.gbuf.zip", fps=30, metadata={"when": object()})
    with pytest.raises(GBufferError, match="cannot write here") as exc:
        GbufZipWriter(tmp_path / "no-such-folder" / "x.gbuf.zip", fps=30)
    assert "no-such-folder" in one_line(exc)


def rewrite_archive(src: Path, dst: Path, *, drop: set[str] = frozenset(),
                    manifest: dict | str | None = None) -> Path:
    with zipfile.ZipFile(src) as a, zipfile.ZipFile(dst, "w") as b:
        for name in a.namelist():
            if name in drop:
                continue
            if name == "manifest.json" and manifest is not None:
                data = manifest if isinstance(manifest, str) else json.dumps(manifest)
            else:
                data = a.read(name)
            b.writestr(name, data)
    return dst


def test_gbuf_zip_damaged_archives_are_refused(tmp_path, rng):
    good = record(tmp_path / "good.gbuf.zip", make_frames(rng, 3))
    manifest = json.loads(zipfile.ZipFile(good).read("manifest.json"))
    truncated = tmp_path / "truncated.gbuf.zip"
    truncated.write_bytes(good.read_bytes()[: good.stat().st_size // 2])
    cases = [
        (truncated, "not a zip archive, or truncated"),
        (rewrite_archive(good, tmp_path / "unfinished.gbuf.zip", drop={"manifest.json"}), "no manifest.json"),
        (rewrite_archive(good, tmp_path / "missing.gbuf.zip", drop={"frames/000001.png"}),
         "says 3 frames but the archive holds 2"),
        (rewrite_archive(good, tmp_path / "count.gbuf.zip",
                         manifest={**manifest, "frame_count": 4, "timestamps": [0, 1, 2, 3]}),
         "says 4 frames but the archive holds 3"),
        (rewrite_archive(good, tmp_path / "times.gbuf.zip", manifest={**manifest, "timestamps": [0]}),
         "timestamps: must be 3 finite numbers"),
        (rewrite_archive(good, tmp_path / "fields.gbuf.zip", manifest={"format": "alaya-gbuf", "version": 1}),
         "missing field.*width, height, fps, frame_count, timestamps"),
        (rewrite_archive(good, tmp_path / "json.gbuf.zip", manifest="{not json"), "not valid JSON"),
        (rewrite_archive(good, tmp_path / "future.gbuf.zip", manifest={**manifest, "version": 9}),
         "format version 9 is newer"),
        (rewrite_archive(good, tmp_path / "width.gbuf.zip", manifest={**manifest, "width": "wide"}),
         "width: .*integer"),
        (rewrite_archive(good, tmp_path / "chans.gbuf.zip", manifest={**manifest, "channels": ["albedo"]}),
         "channels: expected"),
    ]
    for path, problem in cases:
        with pytest.raises(GBufferError, match=problem) as exc:
            GbufZipSource(path)
        assert path.name in one_line(exc)


def test_gbuf_zip_corrupt_frame_is_reported_on_read(tmp_path, rng):
    good = record(tmp_path / "good.gbuf.zip", make_frames(rng, 2))
    with zipfile.ZipFile(good) as archive:
        offset = archive.getinfo("frames/000001.png").header_offset + 30 + len("frames/000001.png") + 200
    data = bytearray(good.read_bytes())
    data[offset] ^= 0xFF  # one flipped byte inside the stored PNG
    bad = tmp_path / "bad.gbuf.zip"
    bad.write_bytes(bytes(data))
    source = GbufZipSource(bad)
    source[0]
    with pytest.raises(GBufferError, match="frame 1 is corrupt") as exc:
        source[1]
    assert "bad.gbuf.zip" in one_line(exc)


# --- clip folders (PyAV) -----------------------------------------------------------------------------------


def test_clip_folder_round_trip_sequential_and_random(tmp_path, rng):
    frames = make_frames(rng, 12)
    write_clip_folder(frames, tmp_path / "clip", fps=15, gop=4)
    with ClipFolderSource(tmp_path / "clip") as source:
        assert (source.width, source.height, source.fps, len(source)) == (W, H, 15.0, 12)
        assert [f.index for f in source] == list(range(12))
        assert [v.seeks for v in source.videos.values()] == [1] * 5  # play order decodes straight through
        for i in (11, 2, 7, 6, 0, 5, 9, 1):  # backwards, across keyframes, inside a GOP
            source._cache.clear()
            np.testing.assert_array_equal(source[i].data, frames[i].data)
        source.seek(10)
        np.testing.assert_array_equal(next(iter(source)).data, frames[10].data)


def test_clip_folder_prefixed_names_and_channel_file_input(tmp_path, rng):
    frames = make_frames(rng, 3)
    paths = write_clip_folder(frames, tmp_path, fps=30, clip="lap1")
    assert paths["depth"].name == "lap1_depth.mp4"
    write_clip_folder(make_frames(rng, 2), tmp_path, fps=30, clip="lap2")
    with ClipFolderSource(paths["normal"]) as source:
        assert source.name == "lap1"
        assert_same_frames(source, frames)
    with pytest.raises(GBufferError, match=r"holds several clips \(lap1, lap2\)") as exc:
        ClipFolderSource(tmp_path)
    one_line(exc)


def test_ordinary_h264_clip_reads_back_close(tmp_path, rng):
    smooth = np.linspace(0, 255, W, dtype=np.uint8)[None, None, :, None].repeat(5, 0).repeat(H, 1).repeat(3, 3)
    frames = [GBufferFrame(i, i / 30, smooth.copy()) for i in range(4)]
    write_clip_folder(frames, tmp_path, fps=30, lossless=False)
    with ClipFolderSource(tmp_path) as source:
        error = np.abs(source[3].data.astype(int) - smooth).mean()
    assert error < 3


def write_bframe_clip(folder: Path, frames: list[GBufferFrame]) -> None:
    """Like ordinary encoder output: yuv420p, B-frames (display order differs from decode order), GOP 8."""
    folder.mkdir()
    for c, channel in enumerate(CHANNELS):
        with av.open(str(folder / f"{channel}.mp4"), "w") as container:
            stream = container.add_stream("libx264", rate=30)
            stream.height, stream.width, stream.pix_fmt = H, W, "yuv420p"
            stream.options = {"crf": "23", "x264-params": "keyint=8:scenecut=0:bframes=3:b-adapt=0"}
            for frame in frames:
                container.mux(stream.encode(av.VideoFrame.from_ndarray(frame.data[c], format="rgb24")))
            container.mux(stream.encode(None))


def test_clip_with_b_frames_random_access_matches_play_order(tmp_path, rng):
    frames = make_frames(rng, 20)
    write_bframe_clip(tmp_path / "clip", frames)
    with ClipFolderSource(tmp_path / "clip") as source:
        assert len(source) == 20
        in_order = [f.data for f in source]
        for i in (19, 3, 12, 8, 7, 0, 15):
            source._cache.clear()
            np.testing.assert_array_equal(source[i].data, in_order[i], err_msg=f"frame {i}")
    # and play order really is display order: each decoded frame is closest to its own source frame
    errors = [[np.abs(d.astype(int) - f.data).mean() for f in frames] for d in in_order[:5]]
    assert [int(np.argmin(e)) for e in errors] == [0, 1, 2, 3, 4]


def test_clip_folder_bad_input(tmp_path, rng):
    write_clip_folder(make_frames(rng, 4), tmp_path / "short", fps=30)
    (tmp_path / "short" / "metallic.mp4").unlink()
    with pytest.raises(GBufferError, match="missing channel file.* metallic.mp4"):
        ClipFolderSource(tmp_path / "short")

    counts = tmp_path / "counts"
    write_clip_folder(make_frames(rng, 4), counts, fps=30)
    write_clip_folder(make_frames(rng, 3), tmp_path / "other", fps=30)
    (tmp_path / "other" / "depth.mp4").replace(counts / "depth.mp4")
    with pytest.raises(GBufferError, match="different frame counts: albedo.mp4 4, depth.mp4 3"):
        ClipFolderSource(counts)

    sizes = tmp_path / "sizes"
    write_clip_folder(make_frames(rng, 2), sizes, fps=30)
    write_clip_folder(make_frames(rng, 2, height=32), tmp_path / "small", fps=30)
    (tmp_path / "small" / "roughness.mp4").replace(sizes / "roughness.mp4")
    with pytest.raises(GBufferError, match="different sizes: .*roughness.mp4 64x32"):
        ClipFolderSource(sizes)

    for channel, damage in [("albedo", lambda b: b"not a video"), ("normal", lambda b: b[:-300])]:
        broken = tmp_path / f"broken-{channel}"
        write_clip_folder(make_frames(rng, 2), broken, fps=30)
        path = broken / f"{channel}.mp4"
        path.write_bytes(damage(path.read_bytes()))  # garbage; truncated so the index at the end is lost
        with pytest.raises(GBufferError, match="truncated or corrupt") as exc:
            ClipFolderSource(broken)
        assert path.name in one_line(exc)

    with pytest.raises(GBufferError, match="even sides"):
        write_clip_folder(make_frames(rng, 1, height=47), tmp_path / "odd", fps=30, lossless=False)


# --- image folders -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("layout", ["folders", "suffixed"])
def test_image_folder_round_trip(tmp_path, rng, layout):
    frames = make_frames(rng, 3)
    write_image_folder(frames, tmp_path, layout=layout)
    with ImageFolderSource(tmp_path, fps=12) as source:
        assert (source.width, source.height, source.fps) == (W, H, 12.0)
        assert_same_frames(source, frames)


def test_image_folder_dotted_names_play_in_natural_order(tmp_path, rng):
    frames = make_frames(rng, 11)
    for frame in frames:
        for channel, image in zip(CHANNELS, frame.data):
            Image.fromarray(image).save(tmp_path / f"frame{frame.index}.{channel}.png")
    source = ImageFolderSource(tmp_path)
    assert_same_frames(source, frames)  # frame10 after frame9, not after frame1
    assert source[10].meta["file"] == "frame10.albedo.png"


def write_png16(path: Path, samples: np.ndarray) -> None:
    """16-bit PNG: RGB through PyAV (Pillow cannot write 48-bit colour), grey through Pillow."""
    if samples.ndim == 2:
        Image.fromarray(samples).save(path)
        return
    codec = av.CodecContext.create("png", "w")
    codec.height, codec.width = samples.shape[:2]
    codec.pix_fmt = "rgb48be"
    packets = codec.encode(av.VideoFrame.from_ndarray(samples, format="rgb48be")) + codec.encode(None)
    path.write_bytes(b"".join(bytes(p) for p in packets))


def write_exr(path: Path, layers: dict[str, np.ndarray]) -> None:
    header = {"compression": OpenEXR.ZIP_COMPRESSION, "type": OpenEXR.scanlineimage}
    OpenEXR.File(header, {k: v.astype(np.float32) for k, v in layers.items()}).write(str(path))


def test_image_folder_16bit_grey_and_exr_depth(tmp_path, rng):
    albedo16 = rng.integers(0, 65536, (H, W, 3), dtype=np.uint16)
    rough16 = rng.integers(0, 65536, (H, W), dtype=np.uint16)
    metallic8 = rng.integers(0, 256, (H, W), dtype=np.uint8)
    normal = rng.integers(0, 256, (H, W, 3), dtype=np.uint8)
    depth_cm = rng.uniform(10, 100_000, (H, W)).astype(np.float32)
    depth_cm[0, :5] = np.inf  # sky
    for c in CHANNELS:
        (tmp_path / c).mkdir()
    write_png16(tmp_path / "albedo" / "0.png", albedo16)
    write_png16(tmp_path / "roughness" / "0.png", rough16)
    Image.fromarray(metallic8).save(tmp_path / "metallic" / "0.png")
    Image.fromarray(normal).save(tmp_path / "normal" / "0.png")
    write_exr(tmp_path / "depth" / "0.exr", {"Z": depth_cm})

    frame = ImageFolderSource(tmp_path, depth_scale=0.01)[0]
    np.testing.assert_array_equal(frame.channel("albedo"), (albedo16 >> 8).astype(np.uint8))
    np.testing.assert_array_equal(frame.channel("roughness"), np.repeat((rough16 >> 8)[..., None], 3, -1))
    np.testing.assert_array_equal(frame.channel("metallic"), np.repeat(metallic8[..., None], 3, -1))
    np.testing.assert_array_equal(frame.channel("normal"), normal)
    np.testing.assert_array_equal(frame.channel("depth"), encode_depth(depth_cm * np.float32(0.01)))
    assert (frame.channel("depth")[0, :5] == 0).all()


def test_image_folder_exr_colour_channels(tmp_path, rng):
    write_image_folder(make_frames(rng, 1), tmp_path, layout="suffixed")
    for channel in ("albedo", "normal", "metallic"):
        (tmp_path / f"000000_{channel}.png").unlink()
    up = np.zeros((H, W, 3), np.float32)
    up[..., 1] = 1.0
    write_exr(tmp_path / "000000_normal.exr", {"R": up[..., 0], "G": up[..., 1], "B": up[..., 2]})
    write_exr(tmp_path / "000000_albedo.exr", {"R": np.full((H, W), 0.5), "G": np.zeros((H, W)),
                                                "B": np.ones((H, W))})
    write_exr(tmp_path / "000000_metallic.exr", {"Y": np.full((H, W), 0.25)})
    frame = ImageFolderSource(tmp_path)[0]
    assert frame.channel("normal")[0, 0].tolist() == [128, 255, 128]
    assert frame.channel("albedo")[0, 0].tolist() == [188, 0, 255]  # linear 0.5 is sRGB 188
    assert frame.channel("metallic")[0, 0].tolist() == [64, 64, 64]


def test_image_folder_bad_input(tmp_path, rng):
    write_image_folder(make_frames(rng, 3), tmp_path / "gap")
    (tmp_path / "gap" / "depth" / "000001.png").unlink()
    with pytest.raises(GBufferError, match="depth has 2 images but the folder has 3 frames.*'000001'"):
        ImageFolderSource(tmp_path / "gap")

    write_image_folder(make_frames(rng, 1), tmp_path / "nofolder")
    for f in (tmp_path / "nofolder" / "normal").iterdir():
        f.unlink()
    (tmp_path / "nofolder" / "normal").rmdir()
    with pytest.raises(GBufferError, match="but not normal"):
        ImageFolderSource(tmp_path / "nofolder")

    write_image_folder(make_frames(rng, 1), tmp_path / "size")
    Image.new("RGB", (W, 32)).save(tmp_path / "size" / "metallic" / "000000.png")
    with pytest.raises(GBufferError, match="image is 64x32 but the sequence is 64x48") as exc:
        ImageFolderSource(tmp_path / "size")
    assert "metallic" in one_line(exc)

    write_image_folder(make_frames(rng, 1), tmp_path / "corrupt", layout="suffixed")
    png = tmp_path / "corrupt" / "000000_normal.png"
    png.write_bytes(png.read_bytes()[:100])
    with pytest.raises(GBufferError, match="not a readable PNG") as exc:
        ImageFolderSource(tmp_path / "corrupt")
    assert "000000_normal.png" in one_line(exc)

    write_image_folder(make_frames(rng, 1), tmp_path / "exr")
    (tmp_path / "exr" / "depth" / "000000.png").unlink()
    (tmp_path / "exr" / "depth" / "000000.exr").write_bytes(b"garbage")
    with pytest.raises(GBufferError, match="not a readable EXR"):
        ImageFolderSource(tmp_path / "exr")
    write_exr(tmp_path / "exr" / "depth" / "000000.exr", {"A": np.ones((H, W)), "B": np.ones((H, W))})
    with pytest.raises(GBufferError, match="no depth/scalar layer"):
        ImageFolderSource(tmp_path / "exr")

    (tmp_path / "empty").mkdir()
    with pytest.raises(GBufferError, match="no PNG or EXR images"):
        ImageFolderSource(tmp_path / "empty")


# --- open_sequence -----------------------------------------------------------------------------------------


def test_open_sequence_picks_the_reader(tmp_path, rng):
    frames = make_frames(rng, 4)
    npy = write_npy_windows(frames, tmp_path / "npy", window=3)
    gbuf = record(tmp_path / "r.gbuf.zip", frames, fps=20)
    clip = write_clip_folder(frames, tmp_path / "clip", fps=25)
    write_image_folder(frames, tmp_path / "images")
    expected = [
        (npy, NpyWindowsSource, 30.0), ([tmp_path / "npy"], NpyWindowsSource, 30.0),
        ([gbuf], GbufZipSource, 20.0), ([tmp_path / "clip"], ClipFolderSource, 25.0),
        ([clip["depth"]], ClipFolderSource, 25.0), ([str(tmp_path / "images")], ImageFolderSource, 30.0),
    ]
    for inputs, kind, fps in expected:
        with open_sequence(inputs) as source:
            assert isinstance(source, kind) and source.fps == fps
            assert_same_frames(source, frames)
    with open_sequence([gbuf], fps=60) as source:
        assert source.fps == 60


def test_open_sequence_plays_windows_in_the_given_order(tmp_path, rng):
    frames = make_frames(rng, 4)
    first, second = write_npy_windows(frames, tmp_path, window=2)
    with open_sequence([second, first]) as source:
        np.testing.assert_array_equal(source[0].data, frames[2].data)
        np.testing.assert_array_equal(source[3].data, frames[1].data)


def test_open_sequence_bad_inputs(tmp_path, rng):
    frames = make_frames(rng, 2)
    npy = write_npy_windows(frames, tmp_path / "npy")
    gbuf = record(tmp_path / "r.gbuf.zip", frames)
    other = record(tmp_path / "s.gbuf.zip", frames)
    (tmp_path / "notes.txt").write_text("hello")
    (tmp_path / "nothing").mkdir()
    cases = [
        ([], "no input given"),
        ([tmp_path / "absent.npy"], "absent.npy: file or folder not found"),
        ([tmp_path / "notes.txt"], "notes.txt: unknown input kind"),
        ([tmp_path / "nothing"], "nothing: unknown input kind"),
        ([npy[0], gbuf], "cannot mix input kinds.*window-00.npy is .npy windows, r.gbuf.zip is a .gbuf.zip"),
        ([gbuf, other], "only .npy windows can be chained"),
    ]
    for inputs, problem in cases:
        with pytest.raises(GBufferError, match=problem) as exc:
            open_sequence(inputs)
        one_line(exc)
    with pytest.raises(GBufferError, match="fps must be a positive number"):
        open_sequence([gbuf], fps=-1)
