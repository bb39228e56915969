"""Regions where context matters (training/eval_regions.py): the warp error (the truth's own far below shuffled
or frozen frames), and eval's `regions` / `warp_error` blocks on real recordings made here, for the model, the
per-pixel baseline and rows added by callers; old recordings and a missing or corrupt mask."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import numpy as np
import pytest

from gbuffer.formats import open_sequence, write_npy_windows
from studio.cli import main
from training.eval_frames import open_held_out
from training.eval_regions import recorded_truth, warp_error, warps
from training.eval_run import EvalOptions, Evaluation

W, H = 64, 48
pytestmark = pytest.mark.gl


def cli(*args) -> int:
    return main([str(a) for a in args])


@pytest.fixture(scope="module")
def recordings(tmp_path_factory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("drives")
    out = {}
    for name, seed, frames in (("train", 1, 16), ("held", 2, 12)):
        out[name] = d / f"{name}.gbuf.zip"
        assert cli("record", "--frames", frames, "--size", f"{W}x{H}", "--seed", seed, "--rgb", "--fps", 10,
                   "-o", out[name]) == 0
    return out


@pytest.fixture(scope="module")
def random_weights(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("weights") / "tiny"
    assert cli("flash", "init-random", out, "--config", "tiny") == 0
    return out


def test_the_truths_warp_error_is_far_below_shuffled_frames(recordings):
    test = open_held_out(recordings["held"], None, None)
    truth = recorded_truth(test)
    assert truth.missing == {}
    pair_warps = warps(test.gbuffer(), truth.cameras)
    assert all(w.valid.mean() > 0.3 for w in pair_warps)             # most surface pixels are seen twice
    rgb = test.rgb()
    shuffled = rgb[np.random.default_rng(0).permutation(len(rgb))]
    own, other = warp_error(rgb, pair_warps), warp_error(shuffled, pair_warps)
    assert own < 0.5 * other, (own, other)
    # a frozen picture is also caught: warped onto moving geometry it no longer lines up
    assert own < warp_error(np.repeat(rgb[:1], len(rgb), axis=0), pair_warps)


# ---- eval's blocks -------------------------------------------------------------------------------------------

def test_eval_scores_regions_and_warp_error_for_each_row(recordings, random_weights, tmp_path):
    report = tmp_path / "eval.json"
    assert cli("eval", random_weights, recordings["held"], "--baselines", "--fit", recordings["train"],
               "--frames", 8, "--conv-minutes", 0.05, "--json", report) == 0
    result = json.loads(report.read_text())
    regions, warp = result["regions"], result["warp_error"]
    assert 0 < regions["shadow_fraction"] < 0.5
    for name in ("shadow", "lit"):
        for row in ("model", "per_pixel"):
            assert regions[name][row]["frames"] > 0 and regions[name][row]["psnr"] > 0
    assert {"model", "per_pixel", "truth", "by_prompt"} <= warp.keys()
    assert warp["truth"] < warp["model"]                       # an untrained model flickers more than the truth
    assert "regions" not in result["not_computed"] and "warp_error" not in result["not_computed"]


def test_extra_rows_are_scored_beside_the_model(recordings, random_weights, tmp_path):
    from training.eval_regions import context_blocks

    # at another size than recorded: the masks are resized as the frames are, the cameras hold at any size
    o = EvalOptions(weights=str(random_weights), recordings=[str(recordings["held"])], frames=6, size=(32, 32))
    evaluation = Evaluation(o)
    not_computed = {}
    blocks = context_blocks(evaluation, not_computed,
                            extra={"copy": lambda test, task: test.rgb(), "skipped": lambda test, task: None})
    assert not_computed == {}
    assert blocks["regions"]["shadow"]["copy"]["psnr"] == 100.0 and blocks["regions"]["lit"]["copy"]["ssim"] == 1.0
    assert blocks["regions"]["shadow"]["skipped"]["frames"] == 0
    assert blocks["warp_error"]["copy"] == blocks["warp_error"]["truth"] < 0.5 * blocks["warp_error"]["model"]
    assert blocks["warp_error"]["skipped"] is None


def test_old_recordings_without_mask_or_camera_still_score_and_say_what_is_missing(recordings, random_weights,
                                                                                   tmp_path):
    windows = tmp_path / "old"
    with open_sequence(recordings["held"]) as source:     # .npy windows keep neither the mask nor the camera
        write_npy_windows(list(source), windows, window=8)
    report = tmp_path / "eval.json"
    assert cli("eval", random_weights, windows, "--frames", 6, "--json", report) == 0
    result = json.loads(report.read_text())
    assert result["overall"]["frames"] == 6
    assert result["regions"] is None and result["warp_error"] is None
    assert "has no sun mask" in result["not_computed"]["regions"]
    assert "has no camera" in result["not_computed"]["warp_error"]


def test_a_recording_with_a_missing_or_corrupt_mask_is_refused_in_one_line(recordings, random_weights, tmp_path,
                                                                         capsys):
    for broken, damage in (("lacking", lambda data: None), ("corrupt", lambda data: b"not a png")):
        path = tmp_path / f"{broken}.gbuf.zip"
        with zipfile.ZipFile(recordings["held"]) as src, zipfile.ZipFile(path, "w") as dst:
            for info in src.infolist():
                data = src.read(info) if info.filename != "sun/000003.png" else damage(src.read(info))
                if data is not None:
                    dst.writestr(info, data)
        capsys.readouterr()
        assert cli("eval", random_weights, path, "--frames", 6) == 2
        err = capsys.readouterr().err.strip()
        assert "\n" not in err and "frame 3" in err and broken in err, err
        assert ("has no sun mask" if broken == "lacking" else "sun: not a readable PNG") in err, err
