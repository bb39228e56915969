"""A take's schedule as played (timeline/schedule/played.py), without a server or a browser: a transition is one
block with its ramp, not one block per frame, and every frame still gets exactly the conditioning it was played
with (issue 45, finding 5; docs/ui.md, "Researchers: the timeline"). In the page: tests/test_ui_timeline_edit.py."""

from __future__ import annotations

import json

import pytest

from prompt_presets import Conditioning, resolve_prompt
from studio.takes.recorder import schedule_as_played
from timeline.schedule import Schedule
from timeline.schedule.live import LiveTimeline


def cond(name: str) -> Conditioning:
    return Conditioning((resolve_prompt(name),))


def played(start: Schedule, switches: dict[int, tuple[str, int]], frames: int) -> list[Conditioning]:
    """What a live session plays frame by frame, with tile switches {frame: (preset, transition)}."""
    timeline, out = LiveTimeline(start), []
    for f in range(frames):
        if f in switches:
            timeline.switch(f, cond(switches[f][0]), switches[f][1])
        timeline.advance(f)
        out.append(timeline.conditioning_at(f))
    return out


def exact(schedule: Schedule, conditionings: list[Conditioning]) -> bool:
    again = Schedule.from_json(json.loads(json.dumps(schedule.to_json())))        # as written to schedule.json
    return all(again.conditioning_at(k) == c for k, c in enumerate(conditionings))


def blocks(schedule: Schedule) -> list[tuple]:
    return [(s.start, s.prompts[0].preset, s.transition.kind, s.transition.frames, s.transition.easing)
            for s in schedule.segments]


def test_a_take_with_two_tile_switches_is_three_blocks_with_their_ramps_not_33():
    conditionings = played(Schedule.single("cyberpunk"), {40: ("volcano", 16), 100: ("polar", 16)}, 160)
    steps = sum(1 for k, c in enumerate(conditionings) if k == 0 or c != conditionings[k - 1])
    assert steps == 33                                 # what a block per change of conditioning made of it
    schedule = schedule_as_played(conditionings, 30)
    assert blocks(schedule) == [(0, "cyberpunk", "cut", 0, "linear"), (40, "volcano", "linear", 16, "linear"),
                                (100, "polar", "linear", 16, "linear")]
    assert schedule.length == 160 and exact(schedule, conditionings)


@pytest.mark.parametrize("easing", ["ease_in", "ease_out", "ease_in_out", "smoothstep"])
@pytest.mark.parametrize("kind", ["linear", "slerp"])
def test_eased_and_spherical_ramps_come_back_as_they_were_scheduled(kind, easing):
    doc = {"version": 1, "fps": 30, "segments": [
        {"start": 0, "prompt": "polar"},
        {"start": 30, "prompts": [{"preset": "volcano", "weight": 0.6}, {"preset": "sandstorm", "weight": 0.4}],
         "transition": {"kind": kind, "frames": 24, "easing": easing}},
        {"start": 90, "prompt": "deep_sea", "transition": {"kind": kind, "frames": 5, "easing": easing}}]}
    source = Schedule.from_json(doc)
    conditionings = [source.conditioning_at(k) for k in range(120)]
    schedule = schedule_as_played(conditionings, 30)
    assert [(s.start, s.transition) for s in schedule.segments] == [(s.start, s.transition) for s in source.segments]
    assert exact(schedule, conditionings)


def test_a_transition_cut_short_by_the_next_switch_stays_exact_frame_by_frame():
    # infrared's 24-frame blend is replaced 10 frames in (a quick second click): no single ramp plays those frames
    conditionings = played(Schedule.single("cyberpunk"), {40: ("infrared", 24), 50: ("polar", 16), 120: ("volcano", 8)},
                           160)
    schedule = schedule_as_played(conditionings, 30)
    assert exact(schedule, conditionings)
    assert blocks(schedule)[-1] == (120, "volcano", "linear", 8, "linear")       # the next switch is one block again
    assert len(schedule.segments) < sum(1 for k, c in enumerate(conditionings) if k == 0 or c != conditionings[k - 1])


def test_a_take_that_starts_mid_ramp_or_ends_mid_ramp_stays_exact():
    conditionings = played(Schedule.single("cyberpunk"), {20: ("volcano", 30)}, 80)
    for part in (conditionings[30:], conditionings[:35], conditionings[25:40]):
        assert exact(schedule_as_played(part, 30), part)


def test_a_take_of_one_frame_or_one_style_is_one_block():
    assert blocks(schedule_as_played([cond("polar")], 30)) == [(0, "polar", "cut", 0, "linear")]
    assert len(schedule_as_played([cond("polar")] * 50, 30).segments) == 1
