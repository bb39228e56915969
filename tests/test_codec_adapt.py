"""Adapting a trained codec to another game (`train codec --from DIR [--freeze-encoder]`, issue 46 item 6): the
decoder and its guide learn the new game's pictures while the encoder, and so the latent space a model was trained
on, stays; a fine-tune given that codec (`train --weights M --codec C`) then ships its decoder. Tiny models, a few
steps: untrained, but the real parts and the real command line."""

from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import load_file

from renderer import create_renderer
from renderer.flash.weights import TINY_DECODER
from studio.cli import main
from training.codec import CODEC_JSON

W, H = 64, 48


def cli(*args) -> int:
    return main([str(a) for a in args])


def codec_args(rec, out, *more) -> list:
    return ["train", "codec", rec, "--config", "tiny", "--size", f"{W}x{H}", "--steps", 3, "--batch", 2,
            "--no-progress", "-o", out, *more]


def parts(path, prefix: str) -> dict[str, torch.Tensor]:
    return {k: v for k, v in load_file(path / TINY_DECODER).items() if k.startswith(prefix)}


def same(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


@pytest.fixture(scope="module")
def games(tmp_path_factory):
    """A model trained on one world (seed 1) with a width-8 guided codec, and a recording of another (seed 2)."""
    root = tmp_path_factory.mktemp("adapt")
    home, away = root / "home.gbuf.zip", root / "away.gbuf.zip"
    for seed, rec in ((1, home), (2, away)):
        assert cli("record", "--frames", 16, "--size", f"{W}x{H}", "--seed", seed, "--rgb", "--fps", 10,
                   "-o", rec) == 0
    assert cli(*codec_args(home, root / "codec", "--guide", 8)) == 0
    assert cli("train", home, "--config", "tiny", "--codec", root / "codec", "--size", f"{W}x{H}", "--steps", 2,
               "--chunks", 1, "--styles", "original,polar", "--no-progress", "-o", root / "model") == 0
    return root, away


def test_an_adapted_codec_keeps_the_models_encoder_and_widths_and_learns_a_new_decoder(games):
    root, away = games
    model, adapted = root / "model", root / "adapted"
    assert cli(*codec_args(away, adapted, "--from", model, "--freeze-encoder", "--styles", "original,polar")) == 0
    assert same(parts(adapted, "encoder."), parts(model, "encoder."))     # the latent space the model learnt
    assert not same(parts(adapted, "decoder."), parts(model, "decoder."))
    assert not same(parts(adapted, "guide."), parts(model, "guide."))
    doc = json.loads((adapted / CODEC_JSON).read_text())
    assert (doc["guide_width"], doc["adapted_from"], doc["settings"]["freeze_encoder"]) == (8, "model", True)
    assert doc["step"] == 3
    loose = root / "loose"                                                   # without --freeze-encoder all adapt
    assert cli(*codec_args(away, loose, "--from", model)) == 0
    assert not same(parts(loose, "encoder."), parts(model, "encoder."))


def test_a_fine_tune_given_the_adapted_codec_ships_its_decoder(games):
    root, away = games
    adapted = root / "adapted-for-tune"
    assert cli(*codec_args(away, adapted, "--from", root / "model", "--freeze-encoder")) == 0
    tuned = root / "tuned"
    assert cli("train", away, "--config", "tiny", "--weights", root / "model", "--codec", adapted,
               "--size", f"{W}x{H}", "--steps", 1, "--chunks", 1, "--styles", "original,polar", "--no-progress",
               "-o", tuned) == 0
    for prefix in ("decoder.", "guide."):
        assert same(parts(tuned, prefix), parts(adapted, prefix)), prefix
    renderer = create_renderer("flash", weights=str(tuned), device="cpu", unknown_prompt="presets")
    assert renderer.pipeline.decoder.guide is not None


@pytest.mark.parametrize("flags, named", [
    (("--from", "model", "--guide", 4), "--guide"),                 # the codec's own widths are kept
    (("--from", "model", "--encoder-channels", 16), "--encoder-channels"),
    (("--from", "model", "--guide-context"), "--guide-context"),
    (("--freeze-encoder",), "--freeze-encoder"),                    # nothing trained to keep
    (("--from", "nowhere"), "codec.json"),
])
def test_a_codec_that_cannot_be_adapted_as_asked_is_one_line(games, capsys, flags, named):
    root, away = games
    flags = [root / f if f in ("model", "nowhere") else f for f in flags]
    capsys.readouterr()
    assert cli(*codec_args(away, root / "refused", *flags)) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and named in err[0], err
    assert not (root / "refused" / CODEC_JSON).exists()
