"""`alaya-studio train guide`: a guided model's guide refitted on the frames its own transformer makes."""

from __future__ import annotations

import json
import shutil

import pytest
import torch
from safetensors.torch import load_file

from renderer import create_renderer
from renderer.flash.guide import AFFINE_KEY, CONTEXT_KEY
from renderer.flash.weights import TINY_DECODER
from studio.cli import main
from training.bookkeeping import SETTINGS_FILE
from training.codec import CODEC_JSON, load_codec
from training.errors import TrainingError
from training.eval_frames import open_held_out
from training.eval_run import EvalOptions, Evaluation
from training.guide_fit import (GUIDE_FIT_JSON, GuideFitSettings, fit_guide, model_frames, read_guide_fit,
                                window_starts)
from training.model_variants import stack_only

W, H = 64, 48


def cli(*args) -> int:
    return main([str(a) for a in args])


@pytest.fixture(scope="module")
def guided(tmp_path_factory):
    """A recording and a tiny model on a width-8 guided codec (a few steps each: untrained, but the real parts)."""
    root = tmp_path_factory.mktemp("guided")
    rec = root / "a.gbuf.zip"
    assert cli("record", "--frames", 16, "--size", f"{W}x{H}", "--seed", 1, "--rgb", "--fps", 10, "-o", rec) == 0
    assert cli("train", "codec", rec, "--config", "tiny", "--size", f"{W}x{H}", "--steps", 3, "--guide", 8,
               "-o", root / "c", "--no-progress") == 0
    assert cli("train", rec, "--config", "tiny", "--codec", root / "c", "--size", f"{W}x{H}", "--steps", 2,
               "--chunks", 1, "--styles", "original,polar", "--no-progress", "-o", root / "m") == 0
    return rec, root / "m"


def test_the_guide_is_fed_the_stack_frames_a_session_makes_and_its_fit_lowers_their_error(guided):
    rec, weights = guided
    renderer = create_renderer("flash", weights=str(weights), device="cpu", unknown_prompt="presets")
    assert stack_only(renderer).pipeline.decoder.guide is None
    assert renderer.pipeline.decoder.guide is not None             # the renderer itself keeps its guide
    frames = model_frames(renderer, [open_held_out(rec, None, None)], ["original", "polar"], 2,
                          create_renderer("reference"))
    assert len(frames) == 2 * 8 and frames.stack.shape == (16, 3, H, W) and frames.gbuffer.shape == (16, 5, 3, H, W)
    assert not torch.equal(frames.target[0], frames.target[8])       # two styles' targets, not one
    guide = renderer.pipeline.decoder.guide
    fit = fit_guide(guide, frames, GuideFitSettings(minutes=0.1, batch=4, lr=3e-3))
    assert fit["steps"] > 10 and fit["mse_after"] < fit["mse_before"], fit
    assert fit["last_lr"] < 3e-3 * 0.05, fit                             # decayed to near 0 by the budget's end
    constant = fit_guide(guide, frames, GuideFitSettings(minutes=0.1, batch=4, lr=3e-3, lr_decay=False))
    assert constant["steps"] > 10 and constant["last_lr"] == 3e-3, constant


def test_train_guide_rewrites_only_the_guide_and_says_what_it_did(guided, tmp_path, capsys):
    rec, shared = guided
    weights = tmp_path / "m"                          # a copy: the module's model keeps its guide without the head
    shutil.copytree(shared, weights)
    before = load_file(weights / TINY_DECODER)
    assert cli("train", "guide", weights, "--minutes", 0.05, "--styles", "polar", "--every", 4,
               "--no-progress") == 0
    after = load_file(weights / TINY_DECODER)
    assert after.keys() - before.keys() == {AFFINE_KEY, "guide.coef.bias"}     # the default gives it the head
    changed = {k for k in before if not torch.equal(before[k], after[k])}
    assert changed and all(k.startswith("guide.") for k in changed), changed
    report = json.loads((weights / GUIDE_FIT_JSON).read_text())
    assert report["recordings"] == [rec.name] and report["styles"] == ["polar"] and report["frames"] == 4
    assert "guide refitted" in capsys.readouterr().err
    assert create_renderer("flash", weights=str(weights), device="cpu").pipeline.decoder.guide is not None
    assert report["settings"]["lr_decay"] is True and report["last_lr"] < 1e-4, report   # the default: decayed
    assert read_guide_fit(weights)[0].lr_decay and read_guide_fit(weights)[0].affine

    assert cli("train", "guide", weights, "--minutes", 0.05, "--styles", "polar", "--every", 4, "--constant-lr",
               "--no-progress") == 0
    report = json.loads((weights / GUIDE_FIT_JSON).read_text())
    assert report["settings"]["lr_decay"] is False and report["last_lr"] == 1e-3, report
    del report["settings"]["lr_decay"], report["settings"]["affine"]   # a record from before the settings: as then
    (weights / GUIDE_FIT_JSON).write_text(json.dumps(report))
    assert not read_guide_fit(weights)[0].lr_decay and not read_guide_fit(weights)[0].affine


def test_windows_spread_over_the_drive_and_never_run_past_it():
    starts = window_starts(1160, 200, 16)
    assert starts[0] == 0 and starts[-1] == 960
    covered = set().union(*(range(s, s + 200) for s in starts))
    assert covered == set(range(1160)) and starts == sorted(starts)
    assert window_starts(100, 0, 3) == [0, 0, 0] and window_starts(100, 150, 3) == [0, 0, 0]
    assert window_starts(100, 10, 1) == [0]


def test_each_style_streams_its_own_window_of_the_drive(guided):
    rec, weights = guided
    renderer = create_renderer("flash", weights=str(weights), device="cpu", unknown_prompt="presets")
    whole = open_held_out(rec, None, None)
    frames = model_frames(renderer, [whole], ["original", "polar"], 2, create_renderer("reference"), window=6)
    assert len(frames) == 2 * 3                                        # 6 frames a style, every 2nd kept
    kept = [next(i for i in range(len(whole)) if torch.equal(whole.recording.gbuffer[i], g)) for g in frames.gbuffer]
    assert sorted(kept) == [0, 2, 4, 10, 12, 14], kept                 # the first window and the last, one each


@pytest.mark.parametrize("part, key, fitted, args", [
    ("context", CONTEXT_KEY, "guide.ctx.2.weight", ["--context", "--no-affine"]),
    ("affine", AFFINE_KEY, AFFINE_KEY, []),                                         # the head comes by default
])
def test_train_guide_can_give_the_guide_a_part_it_lacks(guided, tmp_path, part, key, fitted, args):
    rec, weights = guided
    copy = tmp_path / "m"
    shutil.copytree(weights, copy)
    assert key not in load_file(copy / TINY_DECODER)
    assert cli("train", "guide", copy, "--minutes", 0.05, "--styles", "polar", "--window", 8, *args,
               "--no-progress") == 0
    after = load_file(copy / TINY_DECODER)
    assert key in after and after[fitted].abs().sum() > 0                        # fitted, not left at zero
    report = json.loads((copy / GUIDE_FIT_JSON).read_text())
    assert report["settings"][part] and report["settings"]["window"] == 8 and report["frames"] == 3   # 0, 3, 6
    guide = create_renderer("flash", weights=str(copy), device="cpu").pipeline.decoder.guide
    assert getattr(guide, part) and not getattr(guide, {"context": "affine", "affine": "context"}[part])
    # `eval --baselines` loads the codec from the same directory: its codec.json must say what the file holds
    assert json.loads((copy / CODEC_JSON).read_text())[f"guide_{part}"] is True
    # and a folder whose codec.json predates that (false over a file with the part) loads as its file says
    meta = json.loads((copy / CODEC_JSON).read_text())
    (copy / CODEC_JSON).write_text(json.dumps({**meta, f"guide_{part}": False}))
    assert getattr(load_codec(copy), f"guide_{part}")


def test_no_transformer_refits_the_guide_on_the_zero_latents_frames_as_the_model_refitted_its_own(guided,
                                                                                                tmp_path):
    rec, weights = guided
    model = tmp_path / "m"
    shutil.copytree(weights, model)
    (model / GUIDE_FIT_JSON).unlink(missing_ok=True)          # as `train` left it: the codec's guide
    settings = json.loads((model / SETTINGS_FILE).read_text())  # the ablation's refiner, fitted briefly
    (model / SETTINGS_FILE).write_text(json.dumps({**settings, "refiner_steps": 10, "refiner_windows": 1,
                                                   "refiner_frames": 8}))
    held = tmp_path / "held.gbuf.zip"
    assert cli("record", "--frames", 8, "--size", f"{W}x{H}", "--seed", 5, "--rgb", "--fps", 10, "-o", held) == 0
    options = lambda **kw: EvalOptions(weights=str(model), recordings=[str(held)], styles=["original", "polar"],  # noqa: E731
                                       baselines=True, conv_minutes=0.01, paraphrases=False, eight_worlds=False, **kw)
    guide_of = lambda renderer: renderer.pipeline.decoder.guide.state_dict()                          # noqa: E731
    same = lambda a, b: all(torch.equal(a[k], b[k]) for k in a)                                       # noqa: E731

    # never refitted: the ablation keeps the codec's guide, as the model does
    ev = Evaluation(options())
    assert "never refitted" in ev.ablations.no_transformer_fit["guide"]
    assert same(guide_of(ev.ablations.no_transformer), guide_of(ev.renderer))

    # refitted on the transformer's frames: the ablation's is refitted the same way on the zero latent's
    assert cli("train", "guide", model, "--minutes", 0.05, "--styles", "polar", "--every", 2, "--no-progress") == 0
    written = (model / TINY_DECODER).read_bytes()
    ev = Evaluation(options(ablation_guide_minutes=0.1))
    fit = ev.ablations.no_transformer_fit["guide"]
    assert fit["styles"] == ["polar"] and fit["settings"]["every"] == 2 and fit["settings"]["minutes"] == 0.1
    assert fit["frames"] == 8 and fit["steps"] > 0 and fit["mse_after"] < fit["mse_before"], fit
    assert not same(guide_of(ev.ablations.no_transformer), guide_of(ev.renderer))
    assert same(guide_of(ev.renderer), guide_of(create_renderer("flash", weights=str(model), device="cpu")))
    assert (model / TINY_DECODER).read_bytes() == written                  # eval writes nothing into the model

    (model / GUIDE_FIT_JSON).write_text('{"settings": 3}')
    with pytest.raises(TrainingError, match="not a guide refit's record"):
        Evaluation(options())


def test_bad_guide_requests_get_one_line(guided, tmp_path, capsys):
    rec, weights = guided
    for args, says in [(("--minutes", 0), "--minutes"), (("--every", 0), "--every"),
                       (("--styles", "nosuch"), "nosuch"), (("--window", -1), "--window")]:
        assert cli("train", "guide", weights, *args, "--no-progress") == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and says in err[0], err
    unguided = tmp_path / "u"            # a model on an unguided codec has no guide to refit
    assert cli("train", "codec", rec, "--config", "tiny", "--size", f"{W}x{H}", "--steps", 1, "-o", tmp_path / "c",
               "--no-progress") == 0
    assert cli("train", rec, "--config", "tiny", "--codec", tmp_path / "c", "--size", f"{W}x{H}", "--steps", 1,
               "--chunks", 1, "--no-progress", "-o", unguided) == 0
    capsys.readouterr()
    assert cli("train", "guide", unguided, "--minutes", 0.01, "--no-progress") == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no G-buffer guide" in err[0] and "--guide" in err[0], err
    assert not (unguided / GUIDE_FIT_JSON).exists()
