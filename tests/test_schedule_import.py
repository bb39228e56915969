"""Imports: Deforum / FizzNodes keyframe prompts and Parseq exports, on hand-written real-looking documents."""

from __future__ import annotations

import copy
import json
import threading
import warnings

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers.parseq import parseq_export, parseq_prompt
from prompt_presets import Conditioning
from timeline.schedule import ScheduleError, ScheduleImportWarning, load_schedule, parse_schedule_text
from timeline.schedule.errors import collected_warnings


def weights(cond: Conditioning) -> dict[str, float]:
    """{preset name or text: weight}."""
    return {p.preset or p.text: p.weight for p in cond.prompts}


# ---- keyframes (Deforum, FizzNodes) --------------------------------------------------------------------------

# FizzNodes' BatchPromptSchedule box: quoted pairs without braces, one per line, trailing comma
FIZZNODES_TEXT = '''"0" :"a medieval castle on a hill, golden hour",
"48" :"volcano",
"96" :"cyberpunk:0.7 AND a medieval castle on a hill, golden hour:0.3",
'''

# Deforum's animation prompts box (JSON), with a negative prompt
DEFORUM_PROMPTS = {"0": "polar", "30": "(vaporwave:1) (deep sea:3)", "60": "a glass city --neg blurry, lowres"}


def test_fizznodes_text_cuts_at_each_keyframe_by_default():
    s = parse_schedule_text(FIZZNODES_TEXT)
    assert s.boundaries() == (0, 48, 96) and s.length is None
    assert weights(s.conditioning_at(47)) == {"a medieval castle on a hill, golden hour": 1.0}
    assert weights(s.conditioning_at(48)) == {"volcano": 1.0}              # a preset name → the preset
    assert weights(s.conditioning_at(96)) == pytest.approx({"cyberpunk": 0.7,
                                                            "a medieval castle on a hill, golden hour": 0.3})


def test_blend_reproduces_fizznodes_interpolation_across_each_gap():
    s = parse_schedule_text(FIZZNODES_TEXT, blend=True)
    castle = "a medieval castle on a hill, golden hour"
    # FizzNodes: for f in [K0, K1), the next prompt weighs (f - K0) / (K1 - K0)
    for f in range(0, 49):
        assert weights(s.conditioning_at(f)).get("volcano", 0.0) == pytest.approx(f / 48), f
    assert weights(s.conditioning_at(48)) == {"volcano": 1.0}
    assert weights(s.conditioning_at(72)) == pytest.approx({"volcano": 0.5, "cyberpunk": 0.35, castle: 0.15})
    assert weights(s.conditioning_at(96)) == pytest.approx({"cyberpunk": 0.7, castle: 0.3})


@pytest.mark.parametrize("text", [
    '{"0": "polar", "10": "volcano"}',
    '"0": "polar", "10": "volcano"',
    '{"0": "polar",\n "10": "volcano",\n}',                  # JSON with a trailing comma: FizzNodes accepts it
    '"0": "polar"\n"10": "volcano"',                         # newline-separated, no commas
    '0: polar, 10: volcano',                                 # unquoted, as the server's API docs show it
    '0: polar\n10: volcano\n',
])
def test_common_keyframe_forms_read_the_same(text):
    s = parse_schedule_text(text)
    assert s.boundaries() == (0, 10)
    assert [seg.prompts[0].preset for seg in s.segments] == ["polar", "volcano"]


def test_unquoted_prompts_keep_their_commas():
    s = parse_schedule_text("0: a castle, misty, at dawn, 24: volcano")
    assert weights(s.conditioning_at(0)) == {"a castle, misty, at dawn": 1.0}


def test_deforum_prompts_with_weighted_groups_and_a_negative_prompt():
    with pytest.warns(ScheduleImportWarning, match=r"negative prompt \(--neg\) at keyframe 60 was dropped"):
        s = parse_schedule_text(json.dumps(DEFORUM_PROMPTS))
    assert weights(s.conditioning_at(30)) == {"vaporwave": 0.25, "deep_sea": 0.75}
    assert weights(s.conditioning_at(60)) == {"a glass city": 1.0}


def test_weights_without_a_number_count_one_and_zero_weights_drop_out():
    s = parse_schedule_text('"0": "polar AND volcano:3 AND fog:0"')
    assert weights(s.conditioning_at(0)) == {"polar": 0.25, "volcano": 0.75}


def test_a_late_first_keyframe_also_covers_the_frames_before_it():
    with pytest.warns(ScheduleImportWarning, match=r"first keyframe is 12: its prompt also plays on frames 0\.\.11"):
        s = parse_schedule_text('"12": "polar", "40": "volcano"')
    assert weights(s.conditioning_at(0)) == {"polar": 1.0}


def test_attention_weights_inside_a_prompt_stay_text_with_a_warning():
    with pytest.warns(ScheduleImportWarning, match=r"attention weights"):
        s = parse_schedule_text('"0": "a castle, (snow:1.2), night"')
    assert weights(s.conditioning_at(0)) == {"a castle, (snow:1.2), night": 1.0}


def test_deforum_settings_file(tmp_path):
    settings = {"W": 832, "H": 448, "fps": 24, "max_frames": 90, "animation_mode": "3D",
                "prompts": {"0": "a harbour", "45": "volcano"},
                "animation_prompts_positive": "cinematic", "animation_prompts_negative": "nsfw, nude",
                "zoom": "0: (1.0025+0.002*sin(1.25*3.14*t/30))"}
    path = tmp_path / "deforum_settings.txt"
    path.write_text(json.dumps(settings, indent=4))
    with pytest.warns(ScheduleImportWarning, match="negative prompt 'nsfw, nude' was dropped"):
        s = load_schedule(path)
    assert (s.fps, s.length, s.boundaries()) == (24, 90, (0, 45))
    assert weights(s.conditioning_at(50)) == {"cinematic volcano": 1.0}   # positive text goes first


@pytest.mark.parametrize("text, message", [
    ('"0": "polar", "0": "volcano"', r"line 1: keyframe 0 appears twice"),
    ('"0": "polar",\n"max_f/2": "volcano"', r"keyframe key 'max_f/2' is not a frame number"),
    ('"0": "polar", "-5": "volcano"', r"keyframe -5 is outside"),
    ('"0": "(polar:`sin(t)`)"', r"keyframe 0: frame-dependent weights .* not supported"),
    ('"0": "polar:-0.5 AND volcano"', r"keyframe 0: negative weight -0\.5 for 'polar' is not supported"),
    ('"0": "polar", "10": ""', r"keyframe 10: empty prompt"),
    ('"0": "polar:0 AND volcano:0"', r"keyframe 0: all weights are 0"),
    ('"0": "polar"\nthe end', r"line 2: expected \"FRAME\": \"prompt\", got 'the end'"),
    ('"0": "polar" "10": "volcano"', r"line 1: keyframe 0: expected ',' or a new line after the prompt"),
    ('"0": "polar, "10": "volcano"', r"keyframe 0: expected ',' or a new line"),
    ('"0": "unterminated', r"line 1: keyframe 0: unterminated quoted prompt"),
    ('{"0": "polar", "x": "volcano"}', r"keyframe key 'x' is not a frame number"),
    ('{"0": 3}', r"keyframe 0: the prompt must be text, got int"),
])
def test_bad_keyframes_are_one_line_errors(text, message):
    with pytest.raises(ScheduleError, match=message) as err:
        parse_schedule_text(text, "keyframes", where="prompts.txt")
    assert str(err.value).startswith("prompts.txt: ") and "\n" not in str(err.value)


def test_keyframes_past_the_given_length_are_an_error():
    with pytest.raises(ScheduleError, match=r"keyframe 120 is at or past the schedule's length \(100 frames\)"):
        parse_schedule_text('"0": "polar", "120": "volcano"', length=100)


# ---- Parseq --------------------------------------------------------------------------------------------------

# "Evenly space prompts" with 10 fade frames over 200 frames: Parseq's own layout for two prompts
EVENLY_SPACED = [parseq_prompt("Prompt 1", "cyberpunk", 0, 105, fade_out=10),
                 parseq_prompt("Prompt 2", "a frozen lake at dawn", 95, 199, fade_in=10)]


def test_parseq_cross_fade_is_one_linear_transition_with_parseqs_weights():
    s = parse_schedule_text(json.dumps(parseq_export(EVENLY_SPACED)))
    assert (s.fps, s.length, s.boundaries()) == (20, 200, (0, 96))
    assert s.segments[1].transition.kind == "linear" and s.segments[1].transition.frames == 10
    lake = "a frozen lake at dawn"
    # Parseq: prompt 2 weighs (f - 95) / 10 on 95..104, prompt 1 weighs 1 - (f - 95) / 10 on 96..105
    assert weights(s.conditioning_at(95)) == {"cyberpunk": 1.0}
    assert weights(s.conditioning_at(96)) == pytest.approx({"cyberpunk": 0.9, lake: 0.1})
    assert weights(s.conditioning_at(100)) == pytest.approx({"cyberpunk": 0.5, lake: 0.5})
    assert weights(s.conditioning_at(104)) == pytest.approx({"cyberpunk": 0.1, lake: 0.9})
    assert weights(s.conditioning_at(105)) == {lake: 1.0}


def test_parseq_fades_that_do_not_line_up_are_imported_exactly_frame_by_frame():
    doc = parseq_export([parseq_prompt("Prompt 1", "cyberpunk", 0, 110, kind="none"),
                         parseq_prompt("Prompt 2", "volcano", 100, 199, fade_in=20)])
    with pytest.warns(ScheduleImportWarning, match=r"frames 101\.\.110: overlapping fades .* one-frame steps"):
        s = parse_schedule_text(json.dumps(doc))
    # frame 105: cyberpunk weighs 1 (no fade), volcano (105 - 100) / 20 = 0.25 → normalised 0.8 / 0.2
    assert weights(s.conditioning_at(105)) == pytest.approx({"cyberpunk": 0.8, "volcano": 0.2})
    # from 111 cyberpunk has ended: volcano alone, whatever its fade weight says
    assert weights(s.conditioning_at(111)) == {"volcano": 1.0}


def test_parseq_common_prompt_and_negative_prompts():
    doc = parseq_export([parseq_prompt("Prompt 1", "a harbour", 0, 199, negative="blurry")], common="at night")
    with pytest.warns(ScheduleImportWarning, match="negative prompts were dropped"):
        s = parse_schedule_text(json.dumps(doc), "parseq")
    assert weights(s.conditioning_at(0)) == {"a harbour at night": 1.0}


def test_parseq_prompts_with_their_own_composable_weights():
    doc = parseq_export([parseq_prompt("Prompt 1", "a harbour", 0, 199, kind="none"),
                         parseq_prompt("Prompt 2", "fog:1 AND rain:3", 50, 80, kind="none")])
    s = parse_schedule_text(json.dumps(doc))
    assert s.boundaries() == (0, 50, 81)
    assert weights(s.conditioning_at(60)) == pytest.approx({"a harbour": 0.5, "fog": 0.125, "rain": 0.375})


def test_parseq_older_prompt_layouts():
    v1 = parseq_export([])
    v1["prompts"] = copy.deepcopy(EVENLY_SPACED)
    assert parse_schedule_text(json.dumps(v1)).boundaries() == (0, 96)
    v0 = parseq_export([])
    v0["prompts"] = {"positive": "polar", "negative": ""}
    assert weights(parse_schedule_text(json.dumps(v0)).conditioning_at(150)) == {"polar": 1.0}


def test_fps_option_overrides_the_exports():
    assert parse_schedule_text(json.dumps(parseq_export(EVENLY_SPACED)), fps=30).fps == 30


def _with(change):
    doc = parseq_export(copy.deepcopy(EVENLY_SPACED))
    change(doc)
    return doc


@pytest.mark.parametrize("doc, message", [
    (_with(lambda d: d["prompts"]["promptList"][1]["overlap"].update(type="custom")),
     r"prompts\.promptList\[1\]\.overlap\.type: 'custom' weights are Parseq formulas"),
    (_with(lambda d: d["prompts"]["promptList"][0].update(positive="cyberpunk ${sin(t)}")),
     r"prompts\.promptList\[0\]\.positive: Parseq expressions .* not supported"),
    (_with(lambda d: d["prompts"].update(enabled=False)), r"prompts\.enabled is false"),
    (_with(lambda d: d["prompts"]["promptList"][1].update({"from": 120})), r"frame 106: no Parseq prompt covers it"),
    (_with(lambda d: d["prompts"]["promptList"][1].update({"to": 50})), r"promptList\[1\]: 'to' \(50\) is before"),
    (_with(lambda d: d["prompts"]["promptList"][1].update({"from": -1})), r"promptList\[1\]\.from: expected a whole"),
    (_with(lambda d: d["prompts"]["promptList"][0].pop("positive")), r"promptList\[0\]\.positive: missing"),
    (_with(lambda d: d["prompts"].update(promptList=[])), r"prompts\.promptList: expected a non-empty list"),
    (_with(lambda d: d.update(prompts="cyberpunk")), r"prompts: expected Parseq's promptList"),
])
def test_bad_parseq_exports_are_one_line_errors(doc, message):
    with pytest.raises(ScheduleError, match=message) as err:
        parse_schedule_text(json.dumps(doc), where="parseq.json")
    assert "\n" not in str(err.value)


# ---- format detection ----------------------------------------------------------------------------------------

def test_auto_detection_and_explicit_formats():
    ours = {"version": 1, "segments": [{"start": 0, "prompt": "polar"}]}
    assert parse_schedule_text(json.dumps(ours)).segments[0].prompts[0].preset == "polar"
    with pytest.raises(ScheduleError, match="not a Parseq export"):
        parse_schedule_text(json.dumps(ours), "parseq")
    with pytest.raises(ScheduleError, match=r"version: missing"):
        parse_schedule_text('{"0": "polar"}', "schedule")
    with pytest.raises(ScheduleError, match="cannot tell the format"):
        parse_schedule_text('{"title": "my show"}')
    with pytest.raises(ScheduleError, match="unknown format 'yaml'"):
        parse_schedule_text('"0": "polar"', "yaml")
    with pytest.raises(ScheduleError, match="empty schedule"):
        parse_schedule_text("  \n")
    with pytest.raises(ScheduleError, match="expected a JSON object, got list"):
        parse_schedule_text('[{"0": "polar"}]')
    with pytest.raises(ScheduleError, match=r"not valid JSON: .* line 1 column 55"):    # broken JSON, not keyframes
        parse_schedule_text('{"version": 1, "segments": [{"start": 0, "prompt": 1},]}')


def test_values_from_requests_never_read_files(tmp_path):
    from timeline.schedule import schedule_from_value
    assert schedule_from_value("eight-worlds").length == 637
    assert schedule_from_value({"0": "polar", "10": "volcano"}).boundaries() == (0, 10)
    assert schedule_from_value("0: polar, 10: volcano").boundaries() == (0, 10)
    path = tmp_path / "s.json"
    path.write_text('{"version": 1, "segments": [{"start": 0, "prompt": "polar"}]}')
    with pytest.raises(ScheduleError, match="expected \"FRAME\": \"prompt\""):
        schedule_from_value(str(path))


# ---- robustness: whatever a user pastes, the answer is a schedule or one ScheduleError --------------------------

@pytest.mark.parametrize("value, message", [
    ({"prompts": {"promptList": [{"positive": "a", "allFrames": True}]}, "keyframes": 5},
     r"^keyframes: expected a list"),
    (_with(lambda d: d["prompts"]["promptList"][0].update(overlap="linear")),
     r"promptList\[0\]\.overlap: expected an obj"),
    ({"version": True, "segments": [{"start": 0, "prompt": "polar"}]}, r"^version: Input should be a valid integer"),
    ({"version": 1, "segments": [{"start": 0, "prompt": "polar"}], "loop": "yes", "length": 9},
     r"^loop: Input should be a valid boolean"),
])
def test_wrongly_typed_fields_are_errors_not_crashes(value, message):
    from timeline.schedule import schedule_from_value
    with pytest.raises(ScheduleError, match=message):
        schedule_from_value(value)


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.text(max_size=80), st.text(alphabet=st.sampled_from(list('0123456789":,{}()\n AND-neg`$ab.')),
                                               max_size=80)))
def test_any_text_is_a_schedule_or_a_schedule_error(text):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ScheduleImportWarning)
        try:
            parse_schedule_text(text)
        except ScheduleError as err:
            assert "\n" not in str(err)


def test_collected_warnings_keep_each_threads_import_apart():
    """The studio imports for many visitors on many threads at once: each import's warnings are its own, and
    none leaks to Python's warnings while collected."""
    results: dict[int, list[str]] = {}
    barrier = threading.Barrier(8)

    def run(i: int) -> None:
        barrier.wait()
        with collected_warnings() as caught:
            for _ in range(20):
                parse_schedule_text(f'{i + 1}: "polar", {i + 50}: "volcano --neg x{i}"', where="import")
        results[i] = caught

    with warnings.catch_warnings(record=True) as leaked:
        warnings.simplefilter("always")
        threads = [threading.Thread(target=run, args=(i,)) for i in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert not [w for w in leaked if issubclass(w.category, ScheduleImportWarning)]
    for i, caught in results.items():
        assert len(caught) == 40 and all(f"keyframe {i + 50} was dropped" in w for w in caught[1::2]), caught[:2]
        assert all(f"first keyframe is {i + 1}:" in w for w in caught[::2])
