"""`alaya-studio eval seeds`: one recipe's eval results over training seeds folded into their mean and range."""

from __future__ import annotations

import json

import pytest

from studio.cli import main
from training.eval_seeds import merge_seed_runs
from training.errors import TrainingError


def result(psnr: float, contribution: float, shadow: float, accuracy: float, styles=("polar", "original")) -> dict:
    """The shape `alaya-studio eval --baselines --styles` writes, with the figures the goals read."""
    return {
        "weights": "nano", "held_out_recordings": ["heldout-seed3.gbuf.zip"], "styles": list(styles),
        "recordings": [{"recording": "heldout-seed3.gbuf.zip", "prompt": s, "psnr": psnr} for s in styles],
        "per_prompt": [], "noise_seeds": {"seeds": [0, 1], "per_seed": [{"psnr": psnr}]},
        "overall": {"frames": 128, "psnr": psnr, "ssim": 0.8},
        "by_prompt": {s: {"psnr": psnr + i} for i, s in enumerate(styles)},
        "baselines": {"per_pixel": {"frames": 128, "psnr": 27.87, "ssim": 0.87}},
        "ablations": {"no_transformer": {"psnr": psnr - contribution}},
        "transformer_contribution": {"psnr": contribution},
        "regions": {"shadow": {"model": {"psnr": shadow}}, "shadow_fraction": 0.064},
        "prompt_control": {"accuracy": accuracy, "paraphrases": {"accuracy": 0.8, "items": [{"a": 1}]}},
    }


def test_the_top_level_is_the_mean_and_range_the_spread_of_every_figure():
    merged = merge_seed_runs([result(27.0, -1.0, 20.0, 0.99), result(28.0, 0.5, 22.0, 1.0),
                              result(29.0, 2.0, 24.5, 0.98)], [0, 1, 2])
    assert merged["overall"]["psnr"] == 28.0 and merged["range"]["overall"]["psnr"] == [27.0, 29.0]
    assert merged["transformer_contribution"]["psnr"] == 0.5
    assert merged["range"]["transformer_contribution"]["psnr"] == [-1.0, 2.0]
    assert merged["regions"]["shadow"]["model"]["psnr"] == 22.1667
    assert merged["by_prompt"]["original"]["psnr"] == 29.0
    assert merged["prompt_control"]["accuracy"] == 0.99
    assert merged["baselines"]["per_pixel"]["psnr"] == 27.87           # the same in every run: its own mean
    assert [e["seed"] for e in merged["training_seeds"]] == [0, 1, 2]
    assert merged["training_seeds"][2]["overall"]["psnr"] == 29.0
    assert merged["training_seeds"][1]["ablations"]["no_transformer"]["psnr"] == 27.5
    # Per-recording and per-item lists stay in each run's own JSON.
    assert "recordings" not in merged["training_seeds"][0]
    assert "items" not in merged["training_seeds"][0]["prompt_control"]["paraphrases"]
    assert merged["styles"] == ["polar", "original"] and merged["noise_seeds"] == [0, 1]


@pytest.mark.parametrize("runs, seeds, words", [
    ([result(27, 0, 20, 1)], [0], "at least two training seeds"),
    ([result(27, 0, 20, 1), result(28, 0, 20, 1)], [0], "2 results"),
    ([result(27, 0, 20, 1), result(28, 0, 20, 1)], [1, 1], "given twice"),
    ([result(27, 0, 20, 1), result(28, 0, 20, 1, styles=("polar",))], [0, 1], "styles differ"),
    ([result(27, 0, 20, 1), {"weights": "x"}], [0, 1], "not an alaya-studio eval result"),
])
def test_runs_that_cannot_be_averaged_are_refused(runs, seeds, words):
    with pytest.raises(TrainingError, match=words):
        merge_seed_runs(runs, seeds)


def test_frames_or_noise_seeds_that_differ_are_refused():
    other = result(28, 0, 20, 1)
    other["overall"]["frames"] = 64
    with pytest.raises(TrainingError, match="frames scored differ"):
        merge_seed_runs([result(27, 0, 20, 1), other], [0, 1])
    other = result(28, 0, 20, 1)
    other["noise_seeds"]["seeds"] = [0]
    with pytest.raises(TrainingError, match="noise seeds differ"):
        merge_seed_runs([result(27, 0, 20, 1), other], [0, 1])


def test_the_command_writes_the_folded_json_and_bad_files_get_one_line(tmp_path, capsys):
    paths = []
    for seed, psnr in enumerate((27.0, 28.5)):
        paths.append(tmp_path / f"seed{seed}.json")
        paths[-1].write_text(json.dumps(result(psnr, -1.0, 20.0, 0.99)))
    out = tmp_path / "nano-eval.json"
    assert main(["eval", "seeds", *map(str, paths), "--seeds", "0,1", "--json", str(out)]) == 0
    merged = json.loads(out.read_text())
    assert merged["overall"]["psnr"] == 27.75 and merged["training_seeds"][1]["result"] == "seed1.json"
    assert "| overall | 27.0 / 0.8 | 28.5 / 0.8 | 27.75 [27.0, 28.5] / 0.8 |" in capsys.readouterr().out
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    for args, words in (([paths[0], bad, "--seeds", "0,1"], "bad.json: is not JSON"),
                        ([paths[0], tmp_path / "gone.json", "--seeds", "0,1"], "gone.json: cannot be read"),
                        ([*paths, "--seeds", "0,x"], "--seeds: '0,x' is not a comma-separated list"),
                        ([*paths, "--seeds", "0,0"], "given twice")):
        assert main(["eval", "seeds", *map(str, args)]) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and words in err, err
