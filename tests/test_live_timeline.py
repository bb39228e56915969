"""The live timeline (studio/schedule/live.py), without a server: the rules the studio page relies on (docs/ui.md)
— a live switch on a loop takes the whole loop, live switches close together coalesce into one block — and its
edits as the rollout sees them, frame by frame."""

from __future__ import annotations

import pytest

from gbuffer.formats import open_sequence, write_npy_windows
from prompt_presets import Conditioning, resolve_prompt
from renderer.reference import ReferenceRenderer
from renderer.reference.synthetic import synthetic_gbuffer
from studio.rollout import Rollout
from studio.schedule import Schedule, ScheduleError
from studio.schedule.live import LiveTimeline


def cond(name: str) -> Conditioning:
    return Conditioning((resolve_prompt(name),))


def weight(conditioning: Conditioning, preset: str) -> float:
    return sum(p.weight for p in conditioning.prompts if p.preset == preset) / sum(p.weight for p in conditioning.prompts)


def play(timeline: LiveTimeline, frames) -> list[Conditioning]:
    """What a rollout of one-frame chunks asks, advancing the playhead before each frame."""
    out = []
    for f in frames:
        timeline.advance(f)
        out.append(timeline.conditioning_at(f))
    return out


def test_a_cut_on_a_loop_plays_the_rest_of_this_pass_then_the_whole_loop():
    timeline = LiveTimeline(Schedule.single("cyberpunk"), source_loop=16)
    play(timeline, range(8))
    assert timeline.switch(8, cond("volcano"), 0) is True                  # it took the whole loop
    assert timeline.conditioning_at(7).label() == "cyberpunk"              # this pass: from the frame on screen
    played = play(timeline, [*range(8, 16), *range(16)])
    assert [c.label() for c in played[:8]] == ["volcano"] * 8
    assert {c.label() for c in played[8:]} == {"volcano"}
    assert timeline.advance(0) is False                                     # the whole loop then stays


@pytest.mark.parametrize("at, transition", [(8, 16), (3, 40), (15, 5)])
def test_a_transition_past_the_wrap_carries_on_into_the_next_passes(at, transition):
    timeline = LiveTimeline(Schedule.single("cyberpunk"), source_loop=16)
    play(timeline, range(at))
    timeline.switch(at, cond("polar"), transition)
    passes = 1 + -(-(at + transition) // 16)
    played = play(timeline, [*range(at, 16), *(f for _ in range(passes) for f in range(16))])
    weights = [weight(c, "polar") for c in played]
    assert all(b >= a - 1e-9 for a, b in zip(weights, weights[1:]))          # it only ever moves towards polar
    assert max(b - a for a, b in zip(weights, weights[1:])) <= 1 / transition + 1e-6   # no jump at a wrap
    assert {c.label() for c in played[-16:]} == {"polar"}                    # then the loop holds polar alone


def test_the_loop_length_is_the_looping_schedules_else_the_recordings():
    looping = Schedule.from_json({"version": 1, "length": 90, "loop": True, "segments": [{"start": 0, "prompt": "polar"}]})
    assert LiveTimeline(looping, source_loop=16).loop_length() == 90
    assert LiveTimeline(Schedule.single("polar"), source_loop=16).loop_length() == 16
    assert LiveTimeline(Schedule.single("polar")).loop_length() is None


def test_live_switches_within_a_transition_or_a_second_make_one_block():
    timeline = LiveTimeline(Schedule.single("cyberpunk"))
    for frame, name, transition in [(100, "polar", 0), (110, "volcano", 0),   # a third of a second later: same block
                                    (200, "infrared", 45), (240, "vaporwave", 45),   # inside infrared's transition
                                    (400, "polar", 0)]:                       # long after: a block of its own
        assert timeline.switch(frame, cond(name), transition) is False
    assert [(seg.start, seg.prompts[0].preset) for seg in timeline.schedule.segments] == [
        (0, "cyberpunk"), (100, "volcano"), (200, "vaporwave"), (400, "polar")]


def test_a_patch_lands_where_it_is_put_and_a_replace_drops_the_passes_to_come():
    timeline = LiveTimeline(Schedule.single("cyberpunk"))
    timeline.patch(50, cond("polar"), 10)
    timeline.patch(55, cond("volcano"), 0)                                  # patches never coalesce
    assert timeline.schedule.boundaries() == (0, 50, 55)
    assert timeline.to_json() == timeline.schedule.to_json()
    looping = LiveTimeline(Schedule.single("cyberpunk"), source_loop=16)
    looping.switch(12, cond("polar"), 10)                                    # passes queued for after the wrap
    looping.replace(Schedule.single("infrared"))
    assert {c.label() for c in play(looping, [*range(12, 16), *range(16)])} == {"infrared"}


def test_a_switch_past_the_end_of_a_fixed_length_schedule_is_refused_and_changes_nothing():
    fixed = Schedule.from_json({"version": 1, "length": 100, "segments": [{"start": 0, "prompt": "polar"}]})
    timeline = LiveTimeline(fixed)
    with pytest.raises(ScheduleError, match=r"segments\[1\]\.start: 150 is at or past the schedule's length"):
        timeline.switch(150, cond("volcano"), 0)
    with pytest.raises(ScheduleError, match="at or past the schedule's length"):
        timeline.patch(100, cond("volcano"), 0)
    assert timeline.schedule is fixed
    timeline.patch(99, cond("volcano"), 0)                                  # the last frame is still in
    assert timeline.conditioning_at(99).label() == "volcano"


def test_a_rollout_renders_what_the_live_timeline_says(tmp_path):
    write_npy_windows((synthetic_gbuffer(32, 16, i / 30, i) for i in range(8)), tmp_path)
    timeline = LiveTimeline(Schedule.single("cyberpunk"))
    rollout = Rollout(open_sequence([tmp_path]), timeline, ReferenceRenderer("cpu").open_session(32, 16))
    try:
        first = rollout.next_chunk()
        timeline.switch(rollout.frame_index, cond("volcano"), 0)
        second = rollout.next_chunk()
    finally:
        rollout.close()
    assert {f.conditioning.label() for f in first} == {"cyberpunk"}
    assert {f.conditioning.label() for f in second} == {"volcano"}
