"""`alaya-studio record`: autopilot laps from the built-in engine to .gbuf.zip or official .npy windows."""

from __future__ import annotations

import os
import subprocess
import sys
from itertools import islice

import numpy as np
import pytest

from gbuffer.engine import EngineSource
from gbuffer.formats import open_sequence
from studio.cli import main
from gbuffer.size import Size, SizeError
from renderer import RendererError, check_size


def record(*args: str) -> int:
    return main(["record", *args])


@pytest.mark.gl
def test_record_writes_a_readable_gbuf_zip_with_the_engine_frames(tmp_path, capsys):
    out = tmp_path / "demo.gbuf.zip"
    assert record("--engine", "demo", "--frames", "5", "-o", str(out), "--size", "64x48", "--seed", "3") == 0
    assert "recording" in capsys.readouterr().err  # the progress bar goes to stderr
    seq = open_sequence([out])
    assert len(seq) == 5 and (seq.width, seq.height) == (64, 48) and seq.fps == 30
    with EngineSource.demo(64, 48, fps=30, seed=3) as engine:
        expected = list(islice(engine, 5))
    for i in (0, 4):  # lossless: exactly the frames the engine renders
        assert np.array_equal(seq[i].data, expected[i].data)


@pytest.mark.gl
def test_record_to_a_directory_writes_npy_windows(tmp_path):
    out = tmp_path / "windows"
    assert record("--frames", "18", "-o", f"{out}/", "--size", "32x24", "--fps", "24") == 0
    windows = sorted(out.glob("window-*.npy"))
    assert [w.name for w in windows] == ["window-00.npy", "window-01.npy"]
    first = np.load(windows[0])
    assert first.shape == (16, 5, 24, 32, 3) and first.dtype == np.uint8
    assert np.load(windows[1]).shape[0] == 2


@pytest.mark.parametrize("args, message", [
    (["--engine", "stk", "--frames", "5"], "--engine: unknown engine 'stk'; available: demo"),
    (["--frames", "0"], "--frames: must be a positive number of frames, got 0"),
    (["--frames", "-3"], "--frames: must be a positive number of frames"),
    (["--frames", "5", "--size", "0x16"], "--size: size 0x16: width and height must be 1..4096"),
    (["--frames", "5", "--size", "abc"], "--size: size 'abc' is not WIDTHxHEIGHT"),
    (["--frames", "5", "--size", "100x5000"], "width and height must be 1..4096"),
    (["--frames", "5", "--fps", "0"], "--fps: must be above 0"),
    (["--frames", "5", "--seed", "-2"], "seed must be a whole number"),
])
def test_bad_arguments_are_one_line_errors(tmp_path, capsys, args, message):
    assert record(*args, "-o", str(tmp_path / "x.gbuf.zip")) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and message in err and "\n" not in err
    assert not (tmp_path / "x.gbuf.zip").exists()


def test_unwritable_outputs_are_one_line_errors(tmp_path, capsys):
    blocker = tmp_path / "a_file"
    blocker.write_text("not a directory")
    cases = [
        (str(blocker / "out.gbuf.zip"), "does not exist"),
        (str(tmp_path / "missing" / "out.gbuf.zip"), "does not exist"),
        (str(blocker / "windows") + "/", "cannot create directory"),
        (str(tmp_path / "out.mp4"), "must end with .gbuf.zip"),
    ]
    for output, message in cases:
        assert record("--frames", "2", "-o", output) == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith("error: -o: ") and message in err and "\n" not in err


def test_sizes_parse_one_way_and_each_consumer_states_its_rule():
    assert tuple(Size.parse("832x448", "--size")) == (832, 448)
    assert Size.parse(" 416X224 ") == Size(416, 224) and str(Size(416, 224)) == "416x224"
    for bad in ("0x16", "abc", "832x", "8x4100", "-8x8", "832*448"):
        with pytest.raises(SizeError, match="--size: size"):
            Size.parse(bad, "--size")
    assert check_size("reference", 13, 7) == Size(13, 7)              # any size
    with pytest.raises(RendererError, match=r"size 24x24: .*multiples of 16 \(the flash renderer"):
        check_size("flash", 24, 24)
    with pytest.raises(SizeError, match="multiples of 2"):
        Size(13, 8).require_multiple(2, "H.264")


def test_a_machine_without_opengl_gets_a_one_line_error(tmp_path):
    # glvnd finds no EGL vendor library: exactly what a machine without Mesa or a GPU driver looks like.
    env = dict(os.environ, __EGL_VENDOR_LIBRARY_FILENAMES=str(tmp_path / "none.json"))
    out = tmp_path / "d.gbuf.zip"
    run = subprocess.run([sys.executable, "-m", "studio.cli", "record", "--frames", "2", "-o", str(out)],
                         env=env, capture_output=True, text=True, timeout=120)
    assert run.returncode == 2
    assert run.stderr.strip().splitlines()[-1].startswith("error: engine: cannot open a headless OpenGL context")
    assert not out.exists()
