"""The live timeline (timeline/schedule/live.py), without a server: the rules the studio page relies on (docs/ui.md)
— a live switch on a loop takes the whole loop, live switches close together coalesce into one block, past the
end of a fixed-length schedule the last segment holds and live switches extend it — and its
edits as the rollout sees them, frame by frame."""

from __future__ import annotations

import pytest

from gbuffer.formats import open_sequence, write_npy_windows
from prompt_presets import Conditioning, resolve_prompt
from renderer.reference import ReferenceRenderer
from renderer.reference.synthetic import synthetic_gbuffer
from timeline.rollout import Rollout
from timeline.schedule import Schedule
from timeline.schedule.live import LiveTimeline


def cond(name: str) -> Conditioning:
    return Conditioning((resolve_prompt(name),))


def weight(conditioning: Conditioning, preset: str) -> float:
    total = sum(p.weight for p in conditioning.prompts)
    return sum(p.weight for p in conditioning.prompts if p.preset == preset) / total


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
    assert timeline.switch(8, cond("volcano"), 0).whole_loop                  # it took the whole loop
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
    looping = Schedule.from_json({"version": 1, "length": 90, "loop": True,
                                  "segments": [{"start": 0, "prompt": "polar"}]})
    assert LiveTimeline(looping, source_loop=16).loop_length() == 90
    assert LiveTimeline(Schedule.single("polar"), source_loop=16).loop_length() == 16
    assert LiveTimeline(Schedule.single("polar")).loop_length() is None


def test_live_switches_within_a_transition_or_a_second_make_one_block():
    timeline = LiveTimeline(Schedule.single("cyberpunk"))
    for frame, name, transition in [(100, "polar", 0), (110, "volcano", 0),   # a third of a second later: same block
                                    (200, "infrared", 45), (240, "vaporwave", 45),   # inside infrared's transition
                                    (400, "polar", 0)]:                       # long after: a block of its own
        assert not timeline.switch(frame, cond(name), transition).whole_loop
    assert [(seg.start, seg.prompts[0].preset) for seg in timeline.schedule.segments] == [
        (0, "cyberpunk"), (100, "volcano"), (200, "vaporwave"), (400, "polar")]


def test_a_switch_to_what_the_block_already_plays_adds_no_block():
    timeline = LiveTimeline(Schedule.single("cyberpunk"))
    timeline.switch(100, cond("cyberpunk"), 16)                              # what plays: nothing to add
    timeline.switch(200, cond("polar"), 16)
    timeline.switch(400, cond("polar"), 0)                                   # the same tile again, much later
    assert timeline.schedule.boundaries() == (0, 200)


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


def fixed(length: int, *segments: tuple[int, str]) -> Schedule:
    return Schedule.from_json({"version": 1, "length": length,
                               "segments": [{"start": start, "prompt": name} for start, name in segments]})


def test_past_the_end_the_last_segment_holds_and_a_live_switch_extends_the_timeline():
    timeline = LiveTimeline(fixed(100, (0, "polar"), (50, "infrared")))
    assert play(timeline, [99, 100, 150])[-1].label() == "infrared"        # the last segment holds
    assert timeline.switch(150, cond("volcano"), 10) == (False, None)              # never refused
    assert timeline.schedule.boundaries() == (0, 50, 150) and timeline.schedule.length == 160
    played = play(timeline, range(150, 170))
    assert weight(played[0], "volcano") < 1 and {c.label() for c in played[10:]} == {"volcano"}
    timeline.switch(400, cond("cyberpunk"), 0)                              # again, far past the new end
    assert timeline.schedule.boundaries() == (0, 50, 150, 400) and timeline.schedule.length == 401
    assert timeline.conditioning_at(1000).label() == "cyberpunk"
    timeline.patch(500, cond("polar"), 0)                                   # the timeline editor's switches too
    assert timeline.schedule.boundaries()[-1] == 500 and timeline.conditioning_at(500).label() == "polar"


def test_a_switch_within_the_length_leaves_the_length_alone():
    timeline = LiveTimeline(fixed(100, (0, "polar")))
    timeline.patch(99, cond("volcano"), 0)                                  # the last frame is still in
    assert timeline.schedule.length == 100 and timeline.conditioning_at(99).label() == "volcano"


WORLDS = ["cyberpunk", "volcano", "sandstorm", "polar", "vaporwave", "holy_gold", "deep_sea", "infrared"]


def eight_worlds() -> Schedule:
    """The built-in's shape: eight worlds, 80 frames each, a 16-frame blend into each (637 frames)."""
    return Schedule.from_json({"version": 1, "length": 637, "segments": [
        {"start": 80 * k, "prompt": name, **({"transition": 16} if k else {})} for k, name in enumerate(WORLDS)]})


@pytest.mark.parametrize("now", [700, 300, 85, 1])        # past its length, within it, in its first blocks
def test_a_schedule_applied_mid_stream_begins_at_the_frame_on_screen_whatever_the_frame(now):
    eight = eight_worlds()
    timeline = LiveTimeline(Schedule.single("polar"))
    timeline.replace(eight, now=now)
    assert timeline.schedule.length == 637 + now
    assert timeline.schedule.boundaries() == (0, *(now + 80 * k for k in range(1, 8)))
    worlds = [timeline.conditioning_at(now + 80 * k + 40).label() for k in range(8)]
    assert worlds == WORLDS                                                  # the whole cycle is seen, from now
    assert timeline.conditioning_at(now).label() == "cyberpunk"


def test_an_open_ended_import_applied_mid_stream_begins_at_the_frame_on_screen():
    keyframes = Schedule.from_json({"version": 1, "segments": [{"start": 0, "prompt": "polar"},
                                                               {"start": 30, "prompt": "vaporwave"}]})
    timeline = LiveTimeline(Schedule.single("cyberpunk"))
    timeline.replace(keyframes, now=900)
    assert timeline.schedule.boundaries() == (0, 930) and timeline.schedule.length is None
    assert [timeline.conditioning_at(f).label() for f in (900, 929, 930)] == ["polar", "polar", "vaporwave"]


@pytest.mark.parametrize("schedule, now", [
    (Schedule.from_json({"version": 1, "length": 90, "loop": True, "segments": [{"start": 0, "prompt": "polar"},
                                                                              {"start": 45, "prompt": "volcano"}]}),
     900),                                                                   # a loop: from where the playhead is
    (Schedule.single("volcano"), 900),                                       # one block: nothing to begin
    (eight_worlds(), 0)])                                                    # at frame 0 it is already its start
def test_a_loop_a_lone_block_or_a_schedule_applied_at_frame_0_applies_as_it_is(schedule, now):
    timeline = LiveTimeline(Schedule.single("cyberpunk"))
    timeline.replace(schedule, now=now)
    assert timeline.schedule is schedule


def test_an_edit_of_the_schedule_that_plays_is_never_shifted():
    played_out = fixed(100, (0, "polar"), (50, "infrared"))
    timeline = LiveTimeline(played_out)
    timeline.replace(played_out)                                            # an edit sent at frame 700: no `now`
    assert timeline.schedule is played_out


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


def test_a_live_switch_on_a_looping_prepared_timeline_holds_until_its_next_block_and_deletes_none():
    eight = Schedule.from_json({"version": 1, "length": 80, "loop": True, "segments": [
        {"start": start, "prompt": name} for start, name in ((0, "cyberpunk"), (20, "volcano"), (40, "polar"),
                                                             (60, "infrared"))]})
    timeline = LiveTimeline(eight)
    play(timeline, range(25))
    for frame, name in ((25, "deep_sea"), (27, "sandstorm"), (45, "holy_gold"), (70, "vaporwave")):  # keys pressed
        assert timeline.switch(frame, cond(name), 0) == (False, (frame // 20 + 1) * 20)   # until its next block
        play(timeline, range(frame, frame + 2))
    assert [(s.start, s.prompts[0].preset) for s in timeline.schedule.segments] == [
        (0, "cyberpunk"), (20, "volcano"), (25, "sandstorm"), (40, "polar"), (45, "holy_gold"), (60, "infrared"),
        (70, "vaporwave")]                                    # this pass: each holds until the next block
    played = play(timeline, [*range(72, 80), *range(80)])
    assert timeline.schedule == eight                         # the next pass plays the timeline as applied
    assert [c.label() for c in played[8:]] == [eight.conditioning_at(f).label() for f in range(80)]


def test_a_live_switch_before_a_block_to_come_keeps_it():
    timeline = LiveTimeline(fixed(300, (0, "polar"), (100, "volcano"), (200, "deep_sea")))
    timeline.switch(50, cond("infrared"), 0)
    timeline.switch(150, cond("infrared"), 0)
    assert [(s.start, s.prompts[0].preset) for s in timeline.schedule.segments] == [
        (0, "polar"), (50, "infrared"), (100, "volcano"), (150, "infrared"), (200, "deep_sea")]
    timeline.switch(250, cond("cyberpunk"), 0)                 # in the last block: nothing ahead to keep
    assert timeline.schedule.boundaries() == (0, 50, 100, 150, 200, 250)


def starts(timeline: LiveTimeline) -> list[tuple[int, str]]:
    return [(s.start, s.prompts[0].preset) for s in timeline.schedule.segments]


def test_a_live_switch_over_a_prepared_show_never_deletes_a_block():
    """Issue 45, finding 2: Eight worlds applied at frame 0, Polar clicked 5 frames into volcano's block (within
    its blend and its first second, where a switch used to coalesce with the block and replace it)."""
    timeline = LiveTimeline(Schedule.single("cyberpunk"))
    timeline.replace(eight_worlds(), now=0)
    assert timeline.switch(85, cond("polar"), 16) == (False, 160)           # an override until sandstorm
    assert starts(timeline)[:4] == [(0, "cyberpunk"), (80, "volcano"), (85, "polar"), (160, "sandstorm")]
    assert timeline.switch(95, cond("infrared"), 16) == (False, 160)        # a second later: the same override
    assert starts(timeline)[1:4] == [(80, "volcano"), (85, "infrared"), (160, "sandstorm")]
    timeline.switch(177, cond("deep_sea"), 16)                               # the second example
    assert starts(timeline)[3:6] == [(160, "sandstorm"), (177, "deep_sea"), (240, "polar")]
    assert timeline.switch(320, cond("cyberpunk"), 0) == (False, 400)       # on a block's very first frame:
    assert starts(timeline)[6:9] == [(320, "vaporwave"), (321, "cyberpunk"), (400, "holy_gold")]   # one later
    timeline.switch(565, cond("volcano"), 0)                                 # the last block: nothing ahead
    assert starts(timeline)[-2:] == [(560, "infrared"), (565, "volcano")]
    applied = [(80 * k, name) for k, name in enumerate(WORLDS)]
    assert [b for b in applied if b not in starts(timeline)] == []          # every block kept
    played = [timeline.conditioning_at(f).label() for f in (110, 176, 300, 420, 600)]
    assert played == ["infrared", "sandstorm", "polar", "holy_gold", "volcano"]


def test_an_override_with_no_frame_to_play_changes_nothing():
    one_frame = fixed(100, (0, "polar"), (40, "volcano"), (41, "deep_sea"))  # a Parseq step: a one-frame block
    timeline = LiveTimeline(one_frame)
    assert timeline.switch(40, cond("infrared"), 0) == (False, 41)          # 41 begins at once: nothing to play
    assert timeline.schedule is one_frame


def blend(volcano: float) -> Conditioning:
    """The blend slider between cyberpunk and volcano (a style at 0 is left out, as the page sends it)."""
    return Conditioning(tuple(p for p in (resolve_prompt("cyberpunk", 1 - volcano), resolve_prompt("volcano", volcano))
                              if p.weight > 0))


def drag(timeline: LiveTimeline, frames, to: float = 0.99) -> None:
    """A slider drag: one blend step every few frames, from 5 % volcano to `to`."""
    frames = list(frames)
    for k, frame in enumerate(frames):
        timeline.switch(frame, blend(0.05 + (to - 0.05) * k / (len(frames) - 1)), 0)


def test_a_blend_drag_of_any_length_is_one_block_its_ramp_the_drag():
    """Issue 45, finding 5: a drag used to add one block a second, each a cut."""
    timeline = LiveTimeline(Schedule.single("cyberpunk"))
    drag(timeline, range(100, 250, 6))                        # 5 s of steps, each within a second of the last
    assert timeline.schedule.boundaries() == (0, 100)
    block = timeline.schedule.segments[1]
    assert [(p.preset, round(p.weight, 6)) for p in block.prompts] == [("cyberpunk", 0.01), ("volcano", 0.99)]
    assert (block.transition.kind, block.transition.frames) == ("linear", 244 - 100 + 1)   # it ends on the last step
    assert timeline.conditioning_at(99) == cond("cyberpunk") and timeline.conditioning_at(244) == blend(0.99)
    assert 0.3 < weight(timeline.conditioning_at(170), "volcano") < 0.7                     # the drag, as a ramp
    drag(timeline, range(300, 330, 6), to=0.5)                 # a second drag after a pause: a block of its own
    assert timeline.schedule.boundaries() == (0, 100, 300)
    timeline.switch(400, cond("polar"), 0)                     # a tile is not a blend step
    timeline.switch(410, blend(0.3), 0)                        # nor is a blend of other styles than the block's
    assert timeline.schedule.boundaries() == (0, 100, 300, 400)


def test_a_blend_drag_on_a_loop_or_over_a_prepared_show_is_one_block_that_keeps_every_block():
    looping = LiveTimeline(Schedule.single("cyberpunk"), source_loop=400)
    drag(looping, range(100, 200, 8))
    assert looping.schedule.boundaries() == (0, 100)
    play(looping, [*range(196, 400), *range(10)])
    assert looping.schedule.boundaries() == (0,) and looping.conditioning_at(5) == blend(0.99)   # the whole loop
    show = LiveTimeline(fixed(600, (0, "cyberpunk"), (80, "polar"), (300, "deep_sea")))
    drag(show, range(100, 200, 8))                             # an override: it ends where deep_sea begins
    assert starts(show) == [(0, "cyberpunk"), (80, "polar"), (100, "cyberpunk"), (300, "deep_sea")]
    assert show.conditioning_at(299) == blend(0.99) and show.conditioning_at(300) == cond("deep_sea")
