"""Fuzzed schedules: schedule JSON, keyframe text (Deforum / FizzNodes) and Parseq exports parse to a Schedule
that answers every frame, or raise a one-line ScheduleError; never another exception, never a hang."""

from __future__ import annotations

import copy
import json
import warnings

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from helpers.fuzz import fuzz_settings, outcome
from helpers.parseq import parseq_export, parseq_prompt
from timeline.schedule import Schedule, ScheduleError, load_builtin, parse_schedule_text, schedule_from_value

scalars = st.none() | st.booleans() | st.integers(-10**7, 10**7) | st.floats() | st.text(max_size=12) \
    | st.sampled_from(["cyberpunk", "volcano", "linear", "slerp", "ease_in_out", "cut", "0", "-1", "1e9"])
json_values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=3)
                           | st.dictionaries(st.text(max_size=8), inner, max_size=3), max_leaves=8)
EIGHT_WORLDS = load_builtin("eight_worlds").to_json()


def parse(text: str, hint: str | None = None):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # import warnings are fine; only errors matter here
        return outcome(parse_schedule_text, text, hint)


def answers_every_frame(result, frames: list[int]) -> None:
    """A parsed schedule must give conditioning for any frame the rollout may ask."""
    if isinstance(result, Schedule):
        for f in frames:
            cond = result.conditioning_at(f)
            assert cond.prompts and abs(sum(p.weight for p in cond.prompts) - 1) < 1e-6
    else:
        assert isinstance(result, ScheduleError), result


def mutate(doc, path: list, value):
    """`doc` with the value at `path` (keys / list indexes, taken modulo the container's size) replaced."""
    doc = copy.deepcopy(doc)
    node = doc
    for i, step in enumerate(path):
        last = i == len(path) - 1
        if isinstance(node, dict) and node:
            key = sorted(node)[step % len(node)]
        elif isinstance(node, list) and node:
            key = step % len(node)
        else:
            break
        if last or not isinstance(node[key], (dict, list)):
            node[key] = value
            break
        node = node[key]
    return doc


frames = st.lists(st.integers(0, 5000), min_size=1, max_size=4)


@fuzz_settings(150)
@given(path=st.lists(st.integers(0, 20), min_size=1, max_size=4), value=json_values, frames=frames)
def test_mutated_schedule_json(path, value, frames):
    text = json.dumps(mutate(EIGHT_WORLDS, path, value))
    answers_every_frame(parse(text), frames)
    answers_every_frame(parse(text, "schedule"), frames)


@fuzz_settings(100)
@given(doc=st.dictionaries(st.sampled_from(["version", "fps", "length", "loop", "segments", "description", "x"]),
                           json_values | st.lists(st.dictionaries(
                               st.sampled_from(["start", "prompt", "prompts", "transition", "mode", "weight"]),
                               json_values, max_size=4), max_size=4), max_size=6),
       frames=frames)
def test_random_schedule_documents(doc, frames):
    answers_every_frame(parse(json.dumps(doc)), frames)
    answers_every_frame(outcome(schedule_from_value, doc), frames)


keyframe_text = st.lists(st.sampled_from(list('0123456789:",{}\n ()AND.-+`abc_') + [
    "cyberpunk", "volcano", " AND ", "--neg", ":0.5", '"120": ', "1e3"]), max_size=40).map("".join)


@fuzz_settings(200)
@given(text=keyframe_text, frames=frames)
def test_keyframe_text(text, frames):
    assume(text.strip())
    answers_every_frame(parse(text), frames)
    answers_every_frame(parse(text, "keyframes"), frames)


@fuzz_settings(80)
@given(pairs=st.dictionaries(st.integers(-5, 2_000_000).map(str) | st.text(max_size=5), st.text(max_size=30)
                             | st.sampled_from(["cyberpunk:0.7 AND volcano:0.3", "(polar:1) (infrared:2)", "x:-1",
                                                "a `t` b", "--neg blurry"]), min_size=1, max_size=5),
       blend=st.booleans(), frames=frames)
def test_keyframe_dicts(pairs, blend, frames):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = outcome(parse_schedule_text, json.dumps(pairs), "keyframes", blend=blend)
    answers_every_frame(result, frames)


prompt_fields = st.fixed_dictionaries({}, optional={
    "positive": st.text(max_size=20) | st.sampled_from(["cyberpunk", "${x}", "a:0.5 AND b:0.5"]),
    "negative": st.text(max_size=5), "allFrames": json_values, "from": st.integers(-10, 400) | json_values,
    "to": st.integers(-10, 400) | json_values, "name": st.text(max_size=5),
    "overlap": st.fixed_dictionaries({}, optional={"type": st.sampled_from(["none", "linear", "custom", "x"]),
                                                   "inFrames": st.integers(-5, 300) | json_values,
                                                   "outFrames": st.integers(-5, 300) | json_values})})


@fuzz_settings(120)
@given(prompts=st.lists(prompt_fields, max_size=4), last=st.integers(-5, 400) | st.floats() | json_values,
       frames=frames)
def test_parseq_exports(prompts, last, frames):
    doc = parseq_export([{**parseq_prompt(f"P{i}", "cyberpunk", 0, 399), **p} for i, p in enumerate(prompts)])
    doc["keyframes"][1]["frame"] = last
    answers_every_frame(parse(json.dumps(doc)), frames)


@fuzz_settings(60)
@given(path=st.lists(st.integers(0, 20), min_size=1, max_size=5), value=json_values, frames=frames)
def test_mutated_parseq_exports(path, value, frames):
    doc = parseq_export([parseq_prompt("A", "cyberpunk", 0, 105, fade_out=10),
                         parseq_prompt("B", "volcano", 95, 199, fade_in=10)])
    answers_every_frame(parse(json.dumps(mutate(doc, path, value)), "parseq"), frames)


@pytest.mark.parametrize("text", ["[" * 100_000, '{"0": ' * 50_000, '{"segments": ' + "[" * 20_000])
def test_deeply_nested_json_is_a_clear_error(text):
    with pytest.raises(ScheduleError, match="nested too deeply"):
        parse_schedule_text(text)


@pytest.mark.parametrize("last", [float("inf"), float("-inf"), float("nan")])
def test_parseq_keyframe_at_an_infinite_frame_is_ignored(last):
    """JSON allows Infinity and NaN; they once crashed the length computation with OverflowError."""
    doc = parseq_export([parseq_prompt("P", "cyberpunk", 0, 10)])
    doc["keyframes"][1]["frame"] = last
    assert parse(json.dumps(doc)).length == 1  # the other keyframe, frame 0, is the last frame
