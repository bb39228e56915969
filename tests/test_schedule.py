"""Schedule model: frame → conditioning, transitions and easings, loop, live edits, validation errors."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from prompt_presets import Conditioning, PromptSpec, WeightedPrompt, get_preset
from timeline.schedule import MAX_FRAMES, Schedule, ScheduleError


def doc(*segments, **top) -> dict:
    return {"version": 1, "segments": list(segments), **top}


def weights(cond: Conditioning) -> dict[str, float]:
    """{preset name or text: weight}."""
    return {p.preset or p.text: p.weight for p in cond.prompts}


def two_worlds(**transition) -> Schedule:
    """cyberpunk on 0..9, then volcano from frame 10 with the given transition."""
    return Schedule.from_json(doc({"start": 0, "prompt": "cyberpunk"},
                                  {"start": 10, "prompt": "volcano", "transition": transition}))


# ---- frame → conditioning ------------------------------------------------------------------------------------

def test_a_cut_switches_on_the_segments_first_frame():
    s = two_worlds(kind="cut")
    assert weights(s.conditioning_at(9)) == {"cyberpunk": 1.0}
    assert weights(s.conditioning_at(10)) == {"volcano": 1.0}


def test_presets_resolve_to_their_full_prompt_text():
    cond = two_worlds(kind="cut").conditioning_at(0)
    assert cond.prompts == (WeightedPrompt(get_preset("cyberpunk").prompt, 1.0, "cyberpunk"),)


# frames 10..13 of a 4-frame transition: t = 1/4, 2/4, 3/4, 4/4; the volcano weight is easing(t)
@pytest.mark.parametrize("easing, expected", [
    ("linear", [0.25, 0.5, 0.75, 1.0]),
    ("ease_in", [0.0625, 0.25, 0.5625, 1.0]),                # t²
    ("ease_out", [0.4375, 0.75, 0.9375, 1.0]),               # 1 - (1 - t)²
    ("ease_in_out", [0.125, 0.5, 0.875, 1.0]),               # 2t², then 1 - 2(1 - t)²
    ("smoothstep", [0.15625, 0.5, 0.84375, 1.0]),            # 3t² - 2t³
])
def test_transition_weights_follow_the_easing_exactly(easing, expected):
    s = two_worlds(kind="linear", frames=4, easing=easing)
    assert weights(s.conditioning_at(9)) == {"cyberpunk": 1.0}
    for frame, w in zip(range(10, 14), expected):
        got = weights(s.conditioning_at(frame))
        assert got.get("volcano") == pytest.approx(w, abs=1e-12), frame
        assert got.get("cyberpunk", 0.0) == pytest.approx(1 - w, abs=1e-12), frame
    assert s.conditioning_at(13) == s.conditioning_at(14) == s.conditioning_at(500)


def test_blend_mode_comes_from_the_transition_kind_and_the_segment_mode():
    slerp = two_worlds(kind="slerp", frames=4)
    assert slerp.conditioning_at(11).mode == "slerp"
    assert slerp.conditioning_at(14).mode == "linear"           # after the transition: the segment's own mode
    static = Schedule.from_json(doc({"start": 0, "prompts": ["polar", "vaporwave"], "mode": "slerp"}))
    assert static.conditioning_at(0).mode == "slerp"


def test_a_segments_own_weights_are_normalised():
    s = Schedule.from_json(doc({"start": 0, "prompts": [{"preset": "polar", "weight": 3},
                                                        {"text": "a misty harbour", "weight": 1}]}))
    assert weights(s.conditioning_at(0)) == {"polar": 0.75, "a misty harbour": 0.25}


def test_text_that_names_a_preset_is_that_preset_and_other_text_stays_free():
    s = Schedule.from_json(doc({"start": 0, "prompts": [{"text": "Holy Gold"}, "a misty harbour"]}))
    assert [p.preset for p in s.conditioning_at(0).prompts] == ["holy_gold", None]
    assert s.to_json()["segments"][0]["prompts"][1] == {"text": "a misty harbour", "weight": 1.0}


def test_the_same_schedule_gives_the_same_conditioning_every_run():
    text = json.dumps(doc({"start": 0, "prompt": "cyberpunk"},
                          {"start": 30, "prompts": ["volcano", "polar"], "transition":
                              {"kind": "slerp", "frames": 20, "easing": "smoothstep"}},
                          length=90, loop=True))
    a, b = Schedule.from_json(text), Schedule.from_json(text)
    assert [a.conditioning_at(f).to_json() for f in range(200)] == \
           [b.conditioning_at(f).to_json() for f in range(200)]


def test_loop_wraps_frames_past_the_length():
    s = Schedule.from_json(doc({"start": 0, "prompt": "cyberpunk"},
                               {"start": 50, "prompt": "volcano", "transition": {"kind": "linear", "frames": 10}},
                               length=100, loop=True))
    for f in (0, 49, 50, 55, 99):
        assert s.conditioning_at(f + 100) == s.conditioning_at(f + 300) == s.conditioning_at(f)
    assert weights(s.conditioning_at(100)) == {"cyberpunk": 1.0}         # a cut back into the first segment
    assert s.segment_index_at(155) == 1


def test_without_loop_the_last_segment_holds_past_the_length():
    s = Schedule.from_json(doc({"start": 0, "prompt": "cyberpunk"}, {"start": 50, "prompt": "volcano"},
                               length=100))
    assert weights(s.conditioning_at(10_000)) == {"volcano": 1.0}


@pytest.mark.parametrize("frame, message", [(-1, "frames start at 0"), (1.5, "whole number")])
def test_a_bad_frame_is_an_error(frame, message):
    with pytest.raises(ScheduleError, match=message):
        two_worlds(kind="cut").conditioning_at(frame)


def test_segment_lookup_and_boundaries():
    s = Schedule.from_json(doc({"start": 0, "prompt": "cyberpunk"}, {"start": 10, "prompt": "volcano"},
                               {"start": 25, "prompt": "polar"}, length=40))
    assert s.boundaries() == (0, 10, 25)
    assert [s.segment_index_at(f) for f in (0, 9, 10, 24, 25, 39)] == [0, 0, 1, 1, 2, 2]
    assert s.segment_at(12).prompts[0].preset == "volcano"
    assert s.describe() == "3 segments, 40 frames"


# ---- building and live edits ---------------------------------------------------------------------------------

def test_json_round_trip_keeps_the_schedule():
    s = two_worlds(kind="slerp", frames=8, easing="ease_out")
    again = Schedule.from_json(json.dumps(s.to_json()))
    assert again == s
    assert [again.conditioning_at(f) for f in range(20)] == [s.conditioning_at(f) for f in range(20)]


def test_single_holds_one_prompt_for_ever():
    assert weights(Schedule.single("deep-sea").conditioning_at(12345)) == {"deep_sea": 1.0}
    assert weights(Schedule.single("a glass city").conditioning_at(0)) == {"a glass city": 1.0}
    with pytest.raises(ScheduleError, match="empty prompt"):
        Schedule.single("  ")


def test_switch_at_drops_later_segments_and_appends_the_switch():
    s = Schedule.from_json(doc({"start": 0, "prompt": "cyberpunk"}, {"start": 100, "prompt": "volcano"}))
    live = s.switch_at(40, "polar", transition=10)
    assert live.boundaries() == (0, 40)
    assert live.segments[1].transition.kind == "linear" and live.segments[1].transition.frames == 10
    assert weights(live.conditioning_at(44)) == pytest.approx({"cyberpunk": 0.5, "polar": 0.5})
    assert weights(live.conditioning_at(100)) == {"polar": 1.0}
    assert s.boundaries() == (0, 100)                      # the original is unchanged


def test_switch_at_takes_the_prompt_specs_that_messages_carry():
    specs = [PromptSpec(preset="polar", weight=1), PromptSpec(text="fog", weight=3)]   # a blend message's prompts
    s = Schedule.single("cyberpunk").switch_at(10, specs, transition=0, mode="slerp")
    assert weights(s.conditioning_at(10)) == {"polar": 0.25, "fog": 0.75}
    assert s.conditioning_at(10).mode == "slerp"


def test_switch_at_frame_zero_is_a_cut():
    s = Schedule.single("cyberpunk").switch_at(0, "volcano", transition=16)
    assert s.boundaries() == (0,) and s.segments[0].transition.kind == "cut"


def test_an_interrupted_transition_blends_on_from_what_was_showing():
    s = Schedule.single("cyberpunk").switch_at(10, "volcano", transition=10)
    shown = s.conditioning_at(14)                          # cyberpunk 0.5 + volcano 0.5
    live = s.switch_at(15, "polar", transition=4)          # a second click before the first blend finished
    assert [live.conditioning_at(f) for f in range(15)] == [s.conditioning_at(f) for f in range(15)]
    assert weights(live.conditioning_at(15)) == pytest.approx(
        {"cyberpunk": 0.75 * weights(shown)["cyberpunk"], "volcano": 0.75 * weights(shown)["volcano"],
         "polar": 0.25})
    assert weights(live.conditioning_at(18)) == {"polar": 1.0}


def test_switch_at_validates_like_a_file():
    with pytest.raises(ScheduleError, match=r"segments\[1\]\.prompts\[0\]\.preset: unknown preset 'nope'"):
        Schedule.single("cyberpunk").switch_at(5, {"preset": "nope"})


# ---- validation: every error names the segment and the field, in one line ------------------------------------

OK = {"start": 0, "prompt": "cyberpunk"}


@pytest.mark.parametrize("document, message", [
    (doc(OK, {"start": 20, "prompt": "volcano"}, {"start": 10, "prompt": "polar"}),
     r"segments\[2\]\.start: 10 is not after segments\[1\]\.start \(20\)"),
    (doc(OK, {"start": 0, "prompt": "volcano"}), r"segments\[1\]\.start: 0 is not after segments\[0\]\.start"),
    (doc({"start": 5, "prompt": "cyberpunk"}), r"segments\[0\]\.start: the first segment must start at frame 0"),
    (doc(OK, {"start": -3, "prompt": "volcano"}), r"segments\[1\]\.start: .*greater than or equal to 0"),
    (doc(OK, {"start": MAX_FRAMES + 1, "prompt": "volcano"}), r"segments\[1\]\.start: .*less than or equal"),
    (doc(OK, {"start": 9, "prompt": "volcano", "transition": {"kind": "linear", "frames": -4}}),
     r"segments\[1\]\.transition\.frames: .*greater than or equal to 0 \(got -4\)"),
    (doc(OK, {"start": 9, "prompt": "volcano", "transition": {"kind": "linear", "frames": 0}}),
     r"segments\[1\]\.transition\.frames: a 'linear' transition needs at least 1 frame"),
    (doc(OK, {"start": 9, "prompt": "volcano", "transition": {"kind": "cut", "frames": 8}}),
     r"segments\[1\]\.transition\.frames: a cut takes no frames"),
    (doc(OK, {"start": 9, "prompt": "volcano", "transition": {"kind": "fade", "frames": 8}}),
     r"segments\[1\]\.transition\.kind: .*'cut', 'linear' or 'slerp' \(got 'fade'\)"),
    (doc(OK, {"start": 9, "prompt": "volcano", "transition": {"kind": "linear", "frames": 8, "easing": "bounce"}}),
     r"segments\[1\]\.transition\.easing: .*\(got 'bounce'\)"),
    (doc(OK, {"start": 9, "prompt": "volcano", "transition": {"kind": "linear", "frames": 50}}, length=40),
     r"segments\[1\]\.transition\.frames: 50 is longer than the whole schedule \(40 frames\)"),
    (doc({"start": 0, "prompt": "cyberpunk", "transition": {"kind": "linear", "frames": 4}}),
     r"segments\[0\]\.transition: the first segment has nothing to blend from"),
    (doc(OK, {"start": 3, "prompts": [{"preset": "atlantis"}]}),
     r"segments\[1\]\.prompts\[0\]\.preset: unknown preset 'atlantis' \(known: cyberpunk, "),
    (doc(OK, {"start": 3, "prompts": [{"text": "   "}]}), r"segments\[1\]\.prompts\[0\]\.text: empty prompt"),
    (doc(OK, {"start": 3, "prompt": ""}), r"segments\[1\]\.prompts\[0\]\.text: empty prompt"),
    (doc(OK, {"start": 3, "prompts": []}), r"segments\[1\]\.prompts: .*at least 1"),
    (doc(OK, {"start": 3}), r"segments\[1\]\.prompts: missing"),
    (doc(OK, {"start": 3, "prompts": [{"text": "fog", "preset": "polar"}]}),
     r"segments\[1\]\.prompts\[0\]: give exactly one of 'preset' or 'text'"),
    (doc(OK, {"start": 3, "prompt": "fog", "prompts": ["polar"]}), r"segments\[1\]\.prompt: give 'prompt' or "),
    (doc(OK, {"start": 3, "prompts": [{"text": "fog", "weight": -0.5}]}),
     r"segments\[1\]\.prompts\[0\]\.weight: .*greater than or equal to 0 \(got -0\.5\)"),
    (doc(OK, {"start": 3, "prompts": [{"text": "fog", "weight": math.nan}]}),
     r"segments\[1\]\.prompts\[0\]\.weight: .*finite number"),
    (doc(OK, {"start": 3, "prompts": [{"text": "fog", "weight": 0}, {"preset": "polar", "weight": 0}]}),
     r"segments\[1\]\.prompts: the weights sum to 0"),
    (doc(OK, {"start": 3, "prompt": "fog", "colour": "red"}), r"segments\[1\]\.colour: unknown field"),
    (doc(OK, {"start": 50, "prompt": "fog"}, length=50), r"segments\[1\]\.start: 50 is at or past the schedule's "
                                                         r"length \(50 frames\)"),
    (doc(OK, loop=True), r"^loop: a looping schedule needs a length"),
    (doc(OK, length=0), r"^length: .*greater than or equal to 1"),
    (doc(OK, fps=0), r"^fps: .*greater than 0"),
    (doc(), r"^segments: .*at least 1"),
    ({**doc(OK), "version": 2}, r"^version: unknown schedule version 2; this build reads version 1"),
    ({"segments": [OK]}, r"^version: missing"),
])
def test_validation_errors_name_the_segment_and_field_in_one_line(document, message):
    with pytest.raises(ScheduleError, match=message) as err:
        Schedule.from_json(document)
    assert "\n" not in str(err.value)


def test_errors_name_the_file_when_given():
    with pytest.raises(ScheduleError, match=r"^my\.json: segments\[0\]\.start: "):
        Schedule.from_json(doc({"start": 1, "prompt": "polar"}), where="my.json")


@pytest.mark.parametrize("text, message", [("{", "not valid JSON: .* line 1 column 2"),
                                           ('{"version": 1, "version": 1}', "duplicate key 'version'"),
                                           ("[1, 2]", "a schedule is a JSON object, got list")])
def test_bad_json_text_is_one_line(text, message):
    with pytest.raises(ScheduleError, match=message):
        Schedule.from_json(text)


# ---- property: any valid schedule blends correctly at every frame --------------------------------------------

@st.composite
def schedules(draw):
    """Valid schedules whose segments share no prompt, so each frame's weight on a segment is checkable."""
    n = draw(st.integers(1, 5))
    gaps = draw(st.lists(st.integers(1, 30), min_size=n - 1, max_size=n - 1))
    starts = [0]
    for g in gaps:
        starts.append(starts[-1] + g)
    length = starts[-1] + draw(st.integers(1, 50)) if draw(st.booleans()) else None
    segments = []
    for i, start in enumerate(starts):
        k = draw(st.integers(1, 3))
        prompts = [{"text": f"world {i} part {j}", "weight": draw(st.floats(0.01, 10))} for j in range(k)]
        seg = {"start": start, "prompts": prompts}
        if i and draw(st.booleans()):
            seg["transition"] = {"kind": draw(st.sampled_from(["linear", "slerp"])),
                                 "frames": draw(st.integers(1, min(40, length or 40))),
                                 "easing": draw(st.sampled_from(["linear", "ease_in", "ease_out", "ease_in_out",
                                                                 "smoothstep"]))}
        segments.append(seg)
    loop = length is not None and draw(st.booleans())
    return Schedule.from_json(doc(*segments, length=length, loop=loop))


def _segment_share(schedule: Schedule, frame: int, k: int) -> float:
    return sum(p.weight for p in schedule.conditioning_at(frame).prompts if p.text.startswith(f"world {k} "))


@settings(max_examples=60, deadline=None)
@given(schedules())
def test_any_valid_schedule_gives_weights_summing_to_one_at_every_frame(schedule):
    last = schedule.boundaries()[-1]
    for frame in range((schedule.length or last + 45) * 2):
        cond = schedule.conditioning_at(frame)
        assert math.isclose(sum(p.weight for p in cond.prompts), 1.0, abs_tol=1e-9)
        assert all(0 < p.weight <= 1 + 1e-12 for p in cond.prompts)
        # the current segment's prompts weigh the eased progress of its transition, or 1 once it is done
        k = schedule.segment_index_at(frame)
        seg = schedule.segments[k]
        into = (frame % schedule.length if schedule.loop else frame) - seg.start
        done = seg.transition.kind == "cut" or into >= seg.transition.frames
        share = _segment_share(schedule, frame, k)
        assert share == pytest.approx(1.0) if done else 0 < share <= 1 + 1e-12
        if not done and into > 0:                          # monotone: each frame moves further into segment k
            assert share >= _segment_share(schedule, frame - 1, k) - 1e-12
