"""`alaya-studio eval`, measured against things known in advance: the metrics against scikit-image, the per-pixel
baseline on an exactly quadratic map, prompt control on outputs that are exactly a style's target (accuracy 1)
or another style's (accuracy 0), the eight-worlds segments on a renderer that follows the schedule, the codec
stream against itself in one block, and the refusals (a baseline fitted on a test recording)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from skimage.metrics import peak_signal_noise_ratio, structural_similarity

from prompt_presets.conditioning import Conditioning
from prompt_presets.resolve import conditioning_for
from renderer import create_renderer
from renderer.base import Renderer, RenderSession
from renderer.reference.synthetic import synthetic_gbuffer
from studio.cli import main
from training import baselines
from training.baselines import PerPixelFit, codec_reconstruction, pixel_values, quadratic_features
from training.codec import Codec, save_codec
from training.eval_prompt_control import settle_frames, structure
from training.eval_run import EvalOptions, Evaluation
from training.metrics import StreamMetrics, psnr, ssim

from helpers.paired_worlds import H, W, world



def cli(*args) -> int:
    return main([str(a) for a in args])


@pytest.fixture(scope="module")
def worlds(tmp_path_factory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("worlds")
    return {"train": world(d / "train", 24, 0.0), "held_a": world(d / "held_a", 12, 9.0),
            "held_b": world(d / "held_b", 12, 17.0)}


@pytest.fixture(scope="module")
def random_weights(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("weights") / "tiny"
    assert cli("flash", "init-random", out, "--config", "tiny") == 0
    return out


# ---- the metrics ------------------------------------------------------------------------------------------

def test_psnr_and_ssim_agree_with_scikit_image():
    rng = np.random.default_rng(5)
    for shape, spread in (((40, 56, 3), 40), ((24, 24, 3), 120), ((11, 30, 3), 8)):
        a = rng.integers(0, 256, shape, dtype=np.uint8)
        b = np.clip(a.astype(int) + rng.integers(-spread, spread + 1, shape), 0, 255).astype(np.uint8)
        assert psnr(a, b) == pytest.approx(peak_signal_noise_ratio(a, b, data_range=255), abs=1e-9)
        assert ssim(a, b) == pytest.approx(structural_similarity(
            a, b, channel_axis=-1, gaussian_weights=True, sigma=1.5, use_sample_covariance=False,
            data_range=255), abs=1e-6)


def test_psnr_of_known_errors():
    a = np.full((8, 8, 3), 100, np.uint8)
    assert psnr(a, a) == 100.0                                         # identical: the cap, not infinity
    assert psnr(a, a + 16) == pytest.approx(20 * np.log10(255 / 16))   # a constant shift: MSE = 256
    b = a.copy()
    b[0, :4] = 110                                                     # 12 of 192 values off by 10: MSE = 6.25
    assert psnr(a, b) == pytest.approx(10 * np.log10(255 ** 2 / 6.25))


# ---- the per-pixel baseline -------------------------------------------------------------------------------

def test_the_per_pixel_fit_recovers_an_exactly_quadratic_map_on_unseen_frames():
    rng = np.random.default_rng(0)
    truth = rng.normal(0, 0.02, (136, 3))
    truth[0] = 0.5                                                    # colours stay in range: no clipping

    def frames(n):
        g = rng.integers(0, 256, (n, 5, H, W, 3), dtype=np.uint8)
        rgb = np.clip(np.rint(quadratic_features(pixel_values(g)) @ truth * 255), 0, 255).astype(np.uint8)
        return g, rgb

    fit = PerPixelFit(pixels=500)
    for _ in range(4):
        g, rgb = frames(8)
        fit.add(g, {"original": rgb})
    g, rgb = frames(4)
    predicted = fit.solve()["original"].predict(g)
    assert np.abs(predicted.astype(int) - rgb).max() <= 1            # 8-bit rounding of the targets only
    linear = truth.copy()
    linear[16:] = 0                                                   # a map without the products is far off
    guess = np.clip(np.rint(quadratic_features(pixel_values(g)) @ linear * 255), 0, 255)
    assert np.abs(guess - rgb).mean() > 5


def test_the_baseline_is_never_fitted_on_a_test_recording(random_weights, worlds, tmp_path, capsys):
    held = worlds["held_a"]
    assert cli("eval", random_weights, held, "--baselines", "--fit", held) == 2
    err = capsys.readouterr().err.strip()
    assert "held_a is also a test recording" in err and "\n" not in err, err
    copy = tmp_path / "renamed"
    shutil.copytree(held, copy)                                       # the same frames under another name
    assert cli("eval", random_weights, held, "--baselines", "--fit", worlds["train"], copy) == 2
    err = capsys.readouterr().err.strip()
    assert "renamed shares frames with test recording held_a" in err and "\n" not in err, err
    # without --fit the weights must name their training recordings (init-random weights name none)
    assert cli("eval", random_weights, held, "--baselines") == 2
    err = capsys.readouterr().err.strip()
    assert "do not name their training recordings" in err and "--fit" in err and "\n" not in err, err
    assert cli("eval", random_weights, held, "--styles", "polar,nonsense") == 2
    err = capsys.readouterr().err.strip()
    assert "--styles: unknown preset 'nonsense'" in err and "\n" not in err, err
    # and a recording the model was trained on is no test recording at all
    trained = tmp_path / "trained"
    shutil.copytree(random_weights, trained)
    (trained / "train_settings.json").write_text(json.dumps({"recordings": [str(held)]}))
    assert cli("eval", trained, held) == 2
    err = capsys.readouterr().err.strip()
    assert "the model was trained on this recording" in err and "\n" not in err, err


def test_the_baseline_is_fitted_by_default_on_the_recordings_the_model_names(random_weights, worlds, tmp_path):
    trained = tmp_path / "trained"
    shutil.copytree(random_weights, trained)
    (trained / "train_settings.json").write_text(json.dumps({"recordings": [str(worlds["train"].resolve())]}))
    report = tmp_path / "eval.json"
    assert cli("eval", trained, worlds["held_a"], "--baselines", "--frames", 4, "--json", report,
               "--conv-minutes", 0.01) == 0
    result = json.loads(report.read_text())
    assert result["per_pixel_fit"]["recordings"] == [{"recording": "train", "frames": 24}]
    assert result["baselines"]["per_pixel"]["frames"] == 4 and set(result["baselines"]["per_pixel_by_prompt"]) \
        == {"original"}


# ---- prompt control, on outputs known in advance ----------------------------------------------------------

class SwappedStyles(Renderer):
    """The reference renderer asked for each style draws `swap[style]` instead (identity: exactly the target)."""

    name, chunk_size = "swapped", 1

    def __init__(self, swap: dict[str, str]):
        self.reference, self.swap = create_renderer("reference"), swap

    def open_session(self, width, height, seed=0) -> RenderSession:
        inner, swap = self.reference.open_session(width, height, seed), self.swap

        class Session(RenderSession):
            chunk_size, max_chunk = 1, 16

            def render(self, frames, conditioning: list[Conditioning]):
                asked = [c.prompts[0].preset for c in conditioning]
                return inner.render(frames, [conditioning_for(swap[s]) if s in swap else c
                                             for s, c in zip(asked, conditioning)])
        s = Session()
        s.width, s.height, s.seed = width, height, seed
        return s

    def describe(self) -> dict:
        return {"name": self.name}


STYLES = ["polar", "cyberpunk", "volcano"]


def options(worlds, tmp_path, **kw) -> EvalOptions:
    kw = {"paraphrases": False, "eight_worlds": False, **kw}
    return EvalOptions(weights=str(tmp_path), recordings=[str(worlds["held_a"]), str(worlds["held_b"])],
                       styles=list(STYLES), **kw)


def test_outputs_that_are_each_styles_target_score_accuracy_one(worlds, tmp_path):
    result = Evaluation(options(worlds, tmp_path), renderer=SwappedStyles({})).run()
    control = result["prompt_control"]
    assert control["accuracy"] == 1.0 and control["by_prompt"] == dict.fromkeys(STYLES, 1.0)
    assert control["frames"] == 2 * 12 * len(STYLES)
    assert all(result["by_prompt"][s]["psnr"] == 100.0 for s in STYLES)   # scored against the same target
    assert result["held_out_recordings"] == ["held_a", "held_b"]


def test_outputs_of_another_style_score_accuracy_zero_and_the_baselines_fit_per_style(worlds, tmp_path):
    swap = dict(zip(STYLES, STYLES[1:] + STYLES[:1]))                 # polar draws cyberpunk, ...
    o = options(worlds, tmp_path, baselines=True, fit=[str(worlds["train"])], conv_minutes=0.01)
    result = Evaluation(o, renderer=SwappedStyles(swap)).run()
    control = result["prompt_control"]
    assert control["accuracy"] == 0.0 and control["by_prompt"] == dict.fromkeys(STYLES, 0.0)
    per_style = result["baselines"]["per_pixel_by_prompt"]
    assert set(per_style) == set(STYLES) and all(m["frames"] == 24 for m in per_style.values())
    assert result["baselines"]["per_pixel"]["frames"] == 72
    assert result["per_pixel_fit"]["recordings"] == [{"recording": "train", "frames": 24}]
    assert "codec" in result["not_computed"]                         # the weights directory has no codec


def test_eight_worlds_segments_follow_a_renderer_that_follows_the_schedule(worlds, tmp_path):
    o = options(worlds, tmp_path, eight_worlds=True, rollout_frames=112)
    worlds_report = Evaluation(o, renderer=SwappedStyles({})).eight_worlds()
    first, second = worlds_report["segments"]
    assert (first["style"], first["frames"], second["style"], second["frames"]) == ("cyberpunk", 80, "volcano", 32)
    assert first["accuracy"] == 1.0 and first["settle_frames"] == 0
    assert 0 < second["settle_frames"] <= 16 and second["accuracy"] >= 0.5   # the 16-frame blend, then volcano
    assert worlds_report["structure_first"] > 0.1 and worlds_report["structure_ratio"] == pytest.approx(1, abs=0.3)


def test_settle_frames_and_structure_follow_their_definitions():
    assert settle_frames([False, False, True, False, True, True]) == 4
    assert settle_frames([True] * 5) == 0 and settle_frames([True, False]) is None and settle_frames([]) is None
    frames = np.stack([synthetic_gbuffer(W, H, i / 15, i).data for i in range(4)])
    # an image of the geometry channels themselves (depth and normal averaged) has exactly their edges
    geometry = np.rint((frames[:, 1].astype(float) + frames[:, 3]) / 2).astype(np.uint8)
    flat = np.full_like(geometry, 128)
    assert structure(geometry, frames) > 0.9 and structure(flat, frames) == 0.0


# ---- the codec ceiling and noise seeds --------------------------------------------------------------------

def test_the_codec_stream_in_blocks_equals_the_codec_in_one_pass(monkeypatch):
    torch.manual_seed(0)
    codec = Codec(8, (32, 16, 8, 8))
    rgb = np.random.default_rng(1).integers(0, 256, (22, 32, 32, 3), dtype=np.uint8)
    whole = codec_reconstruction(codec, rgb)
    monkeypatch.setattr(baselines, "CODEC_BLOCK", 8)
    assert whole.shape == (20, 32, 32, 3) and np.array_equal(codec_reconstruction(codec, rgb), whole)


def test_eval_codec_scores_the_codec_alone_and_refuses_weights_without_one(random_weights, worlds, tmp_path,
                                                                           capsys):
    torch.manual_seed(0)
    codec_dir = tmp_path / "codec"
    save_codec(Codec(8, (32, 16, 8, 8)), codec_dir, {})
    report = tmp_path / "codec.json"
    assert cli("eval", "codec", random_weights, worlds["held_a"], "--codec", codec_dir, "--json", report) == 0
    result = json.loads(report.read_text())
    assert result["overall"]["frames"] == 12 and result["by_prompt"]["original"]["frames"] == 12
    assert cli("eval", "codec", random_weights, worlds["held_a"]) == 2
    err = capsys.readouterr().err.strip()
    assert "has no RGB encoder" in err and "\n" not in err


def test_noise_seeds_report_the_spread_of_their_own_runs(random_weights, worlds, tmp_path):
    report = tmp_path / "eval.json"
    assert cli("eval", random_weights, worlds["held_a"], worlds["held_b"], "--noise-seeds", 2, "--frames", 8,
               "--json", report) == 0
    result = json.loads(report.read_text())
    per_seed = result["noise_seeds"]["per_seed"]
    assert [r["seed"] for r in per_seed] == [0, 1] and per_seed[0]["psnr"] != per_seed[1]["psnr"]
    assert result["overall"]["psnr_std"] == pytest.approx(np.std([r["psnr"] for r in per_seed]), abs=1e-3)
    assert result["overall"]["frames"] == 2 * 2 * 8 and len(result["recordings"]) == 2


def test_stream_metrics_average_what_each_frame_scores():
    rng = np.random.default_rng(3)
    pairs = [(rng.integers(0, 256, (16, 16, 3), dtype=np.uint8), rng.integers(0, 256, (16, 16, 3), dtype=np.uint8))
             for _ in range(3)]
    m = StreamMetrics()
    for out, truth in pairs:
        m.update(out, truth)
    summary = m.summary()
    assert summary["psnr"] == pytest.approx(np.mean([peak_signal_noise_ratio(t, o, data_range=255)
                                                     for o, t in pairs]), abs=1e-3)


def test_renderer_options_set_what_the_model_under_test_runs_and_bad_ones_get_one_line(random_weights, worlds,
                                                                                      tmp_path, capsys):
    """A live setting (fewer steps, one-latent chunks) is scored by the same eval; the JSON says what ran."""
    runs = {}
    for name, options in (("default", []), ("live", ["--renderer-option", "num_steps=1",
                                                     "--renderer-option", "chunk_size=4"])):
        report = tmp_path / f"{name}.json"
        assert cli("eval", random_weights, worlds["held_a"], "--frames", 8, "--json", report, *options) == 0
        runs[name] = json.loads(report.read_text())
    assert (runs["default"]["renderer"]["num_steps"], runs["live"]["renderer"]["num_steps"]) == (4, 1)
    assert runs["live"]["renderer"]["chunk_size"] == 4
    assert runs["live"]["overall"]["psnr"] != runs["default"]["overall"]["psnr"]      # it rendered otherwise
    for bad, says in (("num_steps=0", "num_steps"), ("weights=/elsewhere", "weights is eval's own"),
                      ("nonsense=1", "nonsense"), ("num_steps", "not KEY=VALUE")):
        assert cli("eval", random_weights, worlds["held_a"], "--renderer-option", bad) == 2
        err = capsys.readouterr().err.strip()
        assert "--renderer-option" in err and says in err and "\n" not in err, (bad, err)
