"""Fuzzed G-buffer files: every reader gives frames or a one-line GBufferError, never another exception.

Each example writes a real file (random bytes, a truncated or bit-flipped valid file, a mangled manifest or
frame) and reads it to the end through `open_sequence`, as the CLI and the server do.
"""

from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from gbuffer.formats import GbufZipWriter, open_sequence, write_clip_folder, write_npy_windows
from gbuffer.formats.gbufzip import MANIFEST_NAME, frame_entry
from gbuffer.formats.imagefile import decode_png, encode_png, read_exr
from gbuffer.frame import GBufferError
from helpers.fuzz import fuzz_settings, outcome
from renderer.reference.synthetic import synthetic_gbuffer

W, H, FRAMES = 16, 8, 3
json_values = st.recursive(st.none() | st.booleans() | st.integers(-2**40, 2**40) | st.floats() | st.text(max_size=8),
                           lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner,
                                                                                       max_size=4), max_leaves=12)


def read_all(path: Path):
    """Open and read every frame (what a render does); the frame count, or the UserError."""
    def run():
        with open_sequence([path]) as seq:
            return sum(1 for _ in seq)
    return outcome(run)


def flip(data: bytes, positions: list[int], value: int) -> bytes:
    out = bytearray(data)
    for p in positions if out else []:
        out[p % len(out)] ^= value or 1
    return bytes(out)


class Originals(dict):
    def __repr__(self) -> str:  # hypothesis prints the arguments of a failing example; the bytes say nothing
        return "originals"


@pytest.fixture(scope="module")
def originals(tmp_path_factory) -> Originals:
    """One small valid file of each kind, as bytes to mangle."""
    d = tmp_path_factory.mktemp("originals")
    frames = [synthetic_gbuffer(W, H, i / 30, i) for i in range(FRAMES)]
    write_npy_windows(frames, d / "npy")
    with GbufZipWriter(d / "rec.gbuf.zip", fps=30, metadata={"engine": "test"}) as w:
        for f in frames:
            w.write(f)
    clip = write_clip_folder(frames, d / "clip", fps=30)
    return Originals({"npy": (d / "npy" / "window-00.npy").read_bytes(), "gbuf": (d / "rec.gbuf.zip").read_bytes(),
            "clip_depth": clip["depth"].read_bytes(), "clip_dir": str(d / "clip"),
            "png": encode_png(frames[0].data[0])})


@pytest.fixture(scope="module")
def scratch(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("fuzz")


def test_originals_read_back(originals, scratch):
    for name, kind in (("a.npy", "npy"), ("a.gbuf.zip", "gbuf")):
        (scratch / name).write_bytes(originals[kind])
        assert read_all(scratch / name) == FRAMES


# ---- .npy windows ----------------------------------------------------------------------------------------

@fuzz_settings(60)
@given(data=st.binary(max_size=512))
def test_random_bytes_as_npy(scratch, data):
    (scratch / "r.npy").write_bytes(data)
    assert isinstance(read_all(scratch / "r.npy"), GBufferError)


@fuzz_settings(60)
@given(cut=st.integers(0, 10_000), flips=st.lists(st.integers(0, 200), max_size=3), value=st.integers(0, 255))
def test_truncated_or_flipped_npy(originals, scratch, cut, flips, value):
    data = originals["npy"]
    (scratch / "t.npy").write_bytes(flip(data[:cut % len(data)] if cut < len(data) else data, flips, value))
    outcome(read_all, scratch / "t.npy")


@fuzz_settings(60)
@given(shape=st.lists(st.integers(0, 6), min_size=0, max_size=6),
       dtype=st.sampled_from(["uint8", "int16", "float32", "bool", "uint16"]))
def test_misshaped_npy(scratch, shape, dtype):
    np.save(scratch / "s.npy", np.zeros(shape, dtype))
    result = read_all(scratch / "s.npy")
    expected_ok = dtype == "uint8" and len(shape) == 5 and shape[1] == 5 and shape[4] == 3 and 0 not in shape
    assert isinstance(result, int) == expected_ok, (shape, dtype, result)


def test_npy_header_claiming_a_huge_window_is_refused_without_allocating(scratch):
    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(buf, {"descr": "|u1", "fortran_order": False,
                                                "shape": (100_000, 5, 448, 832, 3)})
    (scratch / "huge.npy").write_bytes(buf.getvalue() + bytes(1000))
    with pytest.raises(GBufferError, match="huge.npy.*truncated or corrupt"):
        open_sequence([scratch / "huge.npy"])


# ---- .gbuf.zip -------------------------------------------------------------------------------------------

def rezip(original: bytes, replace: dict[str, bytes]) -> bytes:
    """The archive with some entries' bytes replaced (None drops the entry)."""
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(original)) as src, zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as dst:
        for name in src.namelist():
            if name in replace:
                if replace[name] is not None:
                    dst.writestr(name, replace[name])
            else:
                dst.writestr(name, src.read(name))
    return out.getvalue()


@fuzz_settings(60)
@given(cut=st.integers(0, 100_000), flips=st.lists(st.integers(0, 100_000), max_size=4), value=st.integers(0, 255))
def test_truncated_or_flipped_gbuf_zip(originals, scratch, cut, flips, value):
    data = originals["gbuf"]
    (scratch / "t.gbuf.zip").write_bytes(flip(data[:cut] if cut < len(data) else data, flips, value))
    outcome(read_all, scratch / "t.gbuf.zip")


@fuzz_settings(80)
@given(changes=st.dictionaries(st.sampled_from(["format", "version", "width", "height", "fps", "frame_count",
                                                "timestamps", "channels", "frame_layout", "metadata", "source",
                                                "extra"]),
                               json_values, max_size=4),
       drop=st.lists(st.sampled_from(["width", "height", "fps", "frame_count", "timestamps"]), max_size=2))
def test_mangled_manifest(originals, scratch, changes, drop):
    with zipfile.ZipFile(io.BytesIO(originals["gbuf"])) as z:
        manifest = json.loads(z.read(MANIFEST_NAME))
    manifest.update(changes)
    for key in drop:
        manifest.pop(key, None)
    (scratch / "m.gbuf.zip").write_bytes(rezip(originals["gbuf"], {MANIFEST_NAME: json.dumps(manifest).encode()}))
    outcome(read_all, scratch / "m.gbuf.zip")


@fuzz_settings(40)
@given(manifest=st.binary(max_size=64) | st.sampled_from([b"[" * 100_000, b'{"a":' * 50_000, b"\xff\xfe"]))
def test_manifest_that_is_not_json(originals, scratch, manifest):
    (scratch / "j.gbuf.zip").write_bytes(rezip(originals["gbuf"], {MANIFEST_NAME: manifest}))
    assert isinstance(read_all(scratch / "j.gbuf.zip"), GBufferError)


@fuzz_settings(60)
@given(frame=st.integers(0, FRAMES - 1),
       garbage=st.binary(max_size=300) | st.builds(lambda n: encode_png(np.zeros((n, 7, 3), np.uint8)),
                                                   st.integers(1, 50)),
       meta=st.none() | st.binary(max_size=40))
def test_mangled_frame_entries(originals, scratch, frame, garbage, meta):
    replace = {frame_entry(frame): garbage}
    if meta is not None:
        replace[frame_entry(frame, "json")] = meta
    (scratch / "f.gbuf.zip").write_bytes(rezip(originals["gbuf"], replace))
    assert isinstance(read_all(scratch / "f.gbuf.zip"), GBufferError)


# ---- PNG / EXR channel images ----------------------------------------------------------------------------

@fuzz_settings(80)
@given(data=st.binary(max_size=400), flips=st.lists(st.integers(0, 2000), max_size=4), value=st.integers(0, 255),
       use_png=st.booleans())
def test_png_garbage(originals, data, flips, value, use_png):
    raw = flip(originals["png"], flips, value) if use_png else data
    result = outcome(decode_png, raw, "x.png")
    assert isinstance(result, GBufferError) or (result.dtype == np.uint8 and result.shape[2] == 3)


@fuzz_settings(40)
@given(data=st.binary(max_size=400), channel=st.sampled_from(["albedo", "depth", "normal", "roughness"]))
def test_exr_garbage(scratch, data, channel):
    (scratch / "x.exr").write_bytes(b"\x76\x2f\x31\x01" + data)  # EXR magic, then garbage
    assert isinstance(outcome(read_exr, scratch / "x.exr", channel), GBufferError)


# ---- clip folders ----------------------------------------------------------------------------------------

@fuzz_settings(25, deadline_ms=10_000)
@given(cut=st.integers(0, 20_000), flips=st.lists(st.integers(0, 20_000), max_size=6), value=st.integers(0, 255),
       random=st.none() | st.binary(max_size=300))
def test_clip_folder_with_a_garbage_mp4(originals, tmp_path_factory, cut, flips, value, random):
    """One channel's MP4 replaced by random bytes, or truncated / bit-flipped; the other four are intact."""
    folder = tmp_path_factory.mktemp("clip")
    for p in Path(originals["clip_dir"]).iterdir():
        (folder / p.name).write_bytes(p.read_bytes())
    data = originals["clip_depth"]
    bad = random if random is not None else flip(data[:cut] if cut < len(data) else data, flips, value)
    (folder / "depth.mp4").write_bytes(bad)
    result = read_all(folder)
    assert isinstance(result, GBufferError) or result <= FRAMES


def test_clip_whose_metadata_is_not_utf8_still_opens(originals, tmp_path):
    """Found by the fuzzer: a non-UTF-8 major brand (byte 8 of the ftyp box) made PyAV raise UnicodeDecodeError
    while reading the container's metadata, past the reader."""
    folder = tmp_path / "clip"
    folder.mkdir()
    for p in Path(originals["clip_dir"]).iterdir():
        (folder / p.name).write_bytes(p.read_bytes())
    data = originals["clip_depth"]
    assert data[4:8] == b"ftyp"
    (folder / "depth.mp4").write_bytes(flip(data, [8], 0x80))
    result = read_all(folder)
    assert isinstance(result, GBufferError) or result == FRAMES


@pytest.mark.parametrize("old, new", [(b")", b"("), (b"}", b"(")])
def test_npy_with_a_garbled_header_is_a_clear_error(originals, scratch, old, new):
    """Found by the fuzzer: numpy's header parser raised SyntaxError / tokenize.TokenError past the reader."""
    data = originals["npy"]
    at = data.index(old)
    (scratch / "g.npy").write_bytes(data[:at] + new + data[at + 1:])
    with pytest.raises(GBufferError, match="g.npy: not a readable .npy file"):
        open_sequence([scratch / "g.npy"])


def test_manifest_with_a_null_fps_is_a_clear_error(originals, scratch):
    """Found by the fuzzer: `"fps": null` passed the manifest check and failed later with TypeError."""
    with zipfile.ZipFile(io.BytesIO(originals["gbuf"])) as z:
        manifest = json.loads(z.read(MANIFEST_NAME))
    (scratch / "n.gbuf.zip").write_bytes(rezip(originals["gbuf"], {MANIFEST_NAME: json.dumps({**manifest,
                                                                                              "fps": None}).encode()}))
    with pytest.raises(GBufferError, match="manifest.json: fps: Input should be a valid number"):
        open_sequence([scratch / "n.gbuf.zip"])


@pytest.mark.parametrize("cut", [2152, 2529, 3000])
def test_truncated_channel_mp4_is_a_clear_error(originals, tmp_path, cut):
    """Found by the fuzzer: a truncated MP4 raised av's PermissionError (seek) or AttributeError (no codec
    context) past the reader."""
    for p in Path(originals["clip_dir"]).iterdir():
        (tmp_path / p.name).write_bytes(p.read_bytes())
    (tmp_path / "depth.mp4").write_bytes(originals["clip_depth"][:cut])
    result = read_all(tmp_path)
    assert isinstance(result, GBufferError) or result <= FRAMES
