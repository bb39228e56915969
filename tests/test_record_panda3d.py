"""`alaya-studio record --engine panda3d --rgb --seed N`: paired drives of a game we did not write, one route per
seed, each frame with the camera it was drawn from (the warp error of its truth proves the camera is right) and
the sun mask from the scene's shadow map (the lit frame is darker where it says shadow)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("panda3d")

from gbuffer.formats import open_sequence  # noqa: E402
from studio.cli import main  # noqa: E402
from training.eval_frames import open_held_out  # noqa: E402
from training.eval_regions import recorded_truth, warp_error, warps  # noqa: E402

pytestmark = pytest.mark.gl
W, H = 96, 64


def record(path: Path, seed: int, *extra: str) -> Path:
    assert main(["record", "--engine", "panda3d", "--seed", str(seed), "--frames", "24", "--size", f"{W}x{H}",
                 "--fps", "10", "-o", str(path), *extra]) == 0
    return path


@pytest.fixture(scope="module")
def drives(tmp_path_factory) -> dict[int, Path]:
    d = tmp_path_factory.mktemp("panda3d")
    return {seed: record(d / f"seed{seed}.gbuf.zip", seed, "--rgb") for seed in (1, 2)}


def test_each_seed_is_its_own_paired_drive_with_a_camera_per_frame(drives):
    ends = {}
    for seed, path in drives.items():
        with open_sequence(path) as source:
            assert source.paired and source.metadata["engine"] == "panda3d" and source.metadata["seed"] == seed
            frames = list(source)
        assert all(f.rgb is not None and f.meta["route_seed"] == seed and "camera" in f.meta for f in frames)
        assert source.has_sun and all(f.sun.shape == (H, W) for f in frames)
        shadow = np.stack([f.sun < 128 for f in frames])
        surface = np.stack([f.channel("depth")[..., 0] > 0 for f in frames])
        luma = np.stack([f.rgb.astype(float).mean(axis=-1) for f in frames])
        assert 0.01 < (shadow & surface).mean() < 0.6
        assert luma[shadow & surface].mean() < 0.7 * luma[~shadow & surface].mean()
        start, end = np.array(frames[0].meta["position"]), np.array(frames[-1].meta["position"])
        assert np.hypot(*(end - start)[:2]) > 1.0                          # the car drove
        ends[seed] = (end, frames[-1].rgb)
    assert not np.allclose(ends[1][0], ends[2][0], atol=0.5)               # two seeds, two routes


def test_the_recorded_camera_reprojects_the_drive_onto_itself(drives):
    test = open_held_out(drives[2], None, None)
    truth = recorded_truth(test)
    assert truth.missing == {}
    pair_warps = warps(test.gbuffer(), truth.cameras)
    assert np.mean([w.valid.mean() for w in pair_warps]) > 0.5
    rgb = test.rgb()
    own = warp_error(rgb, pair_warps)
    assert own < 0.4 * warp_error(rgb[np.random.default_rng(0).permutation(len(rgb))], pair_warps)


def test_without_rgb_the_drive_is_unpaired_and_a_bad_seed_is_one_line(tmp_path, capsys):
    with open_sequence(record(tmp_path / "plain.gbuf.zip", 1)) as source:
        assert not source.paired and not source.has_sun and "camera" in source.read(0).meta
    capsys.readouterr()
    assert main(["record", "--engine", "panda3d", "--seed", "-1", "--frames", "2", "-o",
                 str(tmp_path / "bad.gbuf.zip")]) == 2
    err = capsys.readouterr().err.strip()
    assert "seed must be a whole number >= 0" in err and "\n" not in err, err
