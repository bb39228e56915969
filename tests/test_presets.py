"""Style presets: the packaged data, name lookup, prompt resolution and validation of data files."""

import json
import shutil

import pytest

from prompt_presets import (
    ORIGINAL_STYLES,
    REPORT_STYLES,
    Conditioning,
    ConditioningError,
    PresetError,
    ReferenceParams,
    blend_params,
    conditioning_for,
    get_preset,
    load_presets,
    preset_names,
    resolve_prompt,
)
from prompt_presets.presets import DATA_DIR


def test_report_styles_come_first_then_the_original_list():
    assert preset_names() == list(REPORT_STYLES) + list(ORIGINAL_STYLES)
    families = {p.family for p in load_presets().values()}
    assert families == {"flash", "alayarenderer"}
    assert all(get_preset(n).family == "flash" for n in REPORT_STYLES)


def test_every_preset_has_a_rich_prompt_a_title_and_a_colour():
    for preset in load_presets().values():
        assert len(preset.prompt.split()) >= 30, preset.name
        assert preset.title and preset.color.startswith("#") and len(preset.color) == 7
        assert isinstance(preset.reference, ReferenceParams)
    prompts = [p.prompt for p in load_presets().values()]
    assert len(set(prompts)) == len(prompts)


@pytest.mark.parametrize("spelling", ["holy_gold", "Holy Gold", "HOLY-GOLD", "  holy gold "])
def test_names_are_case_and_separator_insensitive(spelling):
    assert get_preset(spelling).name == "holy_gold"


def test_unknown_preset_names_the_known_ones():
    with pytest.raises(PresetError, match=r"unknown preset 'lava land'; known: cyberpunk, volcano"):
        get_preset("lava land")
    with pytest.raises(PresetError, match="unknown preset None"):
        get_preset(None)
    assert issubclass(PresetError, ConditioningError)


def test_resolve_prompt_maps_presets_and_keeps_free_text():
    wp = resolve_prompt("Deep Sea", 0.3)
    assert (wp.preset, wp.weight, wp.text) == ("deep_sea", 0.3, get_preset("deep_sea").prompt)
    free = resolve_prompt("  a foggy harbour at dawn ")
    assert (free.preset, free.text) == (None, "a foggy harbour at dawn")
    cond = conditioning_for("polar")
    assert isinstance(cond, Conditioning) and cond.label() == "polar"


@pytest.mark.parametrize("bad", ["", "   "])
def test_empty_prompt_is_rejected(bad):
    with pytest.raises(ConditioningError, match="empty prompt"):
        resolve_prompt(bad)


def test_blend_is_fieldwise_and_halfway():
    a, b = get_preset("infrared").reference, get_preset("polar").reference
    mid = blend_params([(a, 0.5), (b, 0.5)])
    assert mid.infrared == pytest.approx(0.5 * (a.infrared + b.infrared))
    assert mid.sky_top == pytest.approx(tuple(0.5 * (x + y) for x, y in zip(a.sky_top, b.sky_top)))
    assert blend_params([(a, 1.0)]) == a


def _write(tmp_path, doc, name="broken.json"):
    d = tmp_path / "presets"
    d.mkdir(exist_ok=True)
    (d / name).write_text(doc if isinstance(doc, str) else json.dumps(doc))
    return d


def _one(**overrides):
    preset = {"name": "foggy", "title": "Foggy", "family": "flash", "color": "#aabbcc",
              "prompt": "A foggy morning.", "reference": {"fog_density": 0.05}}
    preset.update(overrides)
    return {"version": 1, "presets": [preset]}


def test_a_valid_directory_loads_with_defaults_for_missing_params(tmp_path):
    presets = load_presets(_write(tmp_path, _one(), "ok.json"))
    assert list(presets) == ["foggy"]
    assert presets["foggy"].reference.fog_density == 0.05
    assert presets["foggy"].reference.sun_intensity == ReferenceParams().sun_intensity


@pytest.mark.parametrize("doc, msg", [
    ("{not json", r"broken\.json: not valid JSON"),
    ({"presets": 3}, r"broken\.json: presets: Input should be a valid list \(got 3\)"),
    ({"version": 2, "presets": []}, r"broken\.json: version: Input should be 1 \(got 2\)"),
    (_one(name=""), r"presets\[0\]\.name: missing or empty"),
    (_one(name="Bad Name"), r"\.name: name 'Bad Name' must be snake_case"),
    (_one(color="red"), r"\(foggy\)\.color: color 'red' is not"),
    (_one(family="other"), r"\(foggy\)\.family: family 'other'"),
    (_one(prompt=""), r"\(foggy\)\.prompt: missing or empty"),
    (_one(reference={"fog_densty": 1}), r"\(foggy\)\.reference\.fog_densty: unknown field"),
    (_one(reference={"sun_color": [1, 2]}), r"reference\.sun_color: expected a list of 3 numbers"),
    (_one(reference={"snow": "lots"}), r"reference\.snow: expected a number"),
    (_one(reference={"sun_direction": [0, 0, 0]}), r"reference\.sun_direction: a direction cannot be"),
    (_one(keywords="neon"), r"\.keywords: keywords must be a list"),
    (_one(extra=1), r"\(foggy\)\.extra: unknown field"),
])
def test_a_broken_preset_file_names_the_file_and_field(tmp_path, doc, msg):
    directory = _write(tmp_path, doc)
    with pytest.raises(PresetError, match=msg) as info:
        load_presets(directory)
    assert "\n" not in str(info.value)


def test_duplicate_names_across_files_are_rejected(tmp_path):
    directory = _write(tmp_path, _one(), "a.json")
    _write(tmp_path, _one(), "b.json")
    with pytest.raises(PresetError, match="'foggy' is also defined in a.json"):
        load_presets(directory)


def test_the_packaged_files_reload_from_a_copy(tmp_path):
    copy = tmp_path / "copy"
    shutil.copytree(DATA_DIR, copy)
    assert list(load_presets(copy)) == preset_names()
