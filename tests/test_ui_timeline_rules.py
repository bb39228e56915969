"""The timeline rules the studio page relies on (docs/ui.md): a live switch on a loop takes the whole loop, and
live switches close together coalesce into one block."""

from __future__ import annotations

import pytest

from prompt_presets import Conditioning, resolve_prompt
from studio.schedule import Schedule
from studio.server.timeline import live_switch, loop_length, loop_switch


def cond(name: str) -> Conditioning:
    return Conditioning((resolve_prompt(name),))


def weight(conditioning: Conditioning, preset: str) -> float:
    return sum(p.weight for p in conditioning.prompts if p.preset == preset) / sum(p.weight for p in conditioning.prompts)


def test_a_cut_on_a_loop_plays_the_rest_of_this_pass_then_the_whole_loop():
    switched = loop_switch(Schedule.single("cyberpunk"), 8, 16, cond("volcano"), 0)
    assert [switched.now.conditioning_at(f).label() for f in (7, 8, 15)] == ["cyberpunk", "volcano", "volcano"]
    (whole,) = switched.passes
    assert {whole.conditioning_at(f).label() for f in range(16)} == {"volcano"}


@pytest.mark.parametrize("at, transition", [(8, 16), (3, 40), (15, 5)])
def test_a_transition_past_the_wrap_carries_on_into_the_next_passes(at, transition):
    switched = loop_switch(Schedule.single("cyberpunk"), at, 16, cond("polar"), transition)
    played = [switched.now.conditioning_at(f) for f in range(at, 16)]
    for schedule in switched.passes:
        played += [schedule.conditioning_at(f) for f in range(16)]
    weights = [weight(c, "polar") for c in played]
    assert all(b >= a - 1e-9 for a, b in zip(weights, weights[1:]))          # it only ever moves towards polar
    assert max(b - a for a, b in zip(weights, weights[1:])) <= 1 / transition + 1e-6   # no jump at a wrap
    assert {c.label() for c in played[-16:]} == {"polar"}                    # then the loop holds polar alone


def test_the_loop_length_is_the_looping_schedules_else_the_recordings():
    looping = Schedule.from_json({"version": 1, "length": 90, "loop": True, "segments": [{"start": 0, "prompt": "polar"}]})
    assert loop_length(looping, 16) == 90
    assert loop_length(Schedule.single("polar"), 16) == 16
    assert loop_length(Schedule.single("polar"), None) is None


def test_live_switches_within_a_transition_or_a_second_make_one_block():
    s = Schedule.single("cyberpunk")
    s = live_switch(s, 100, cond("polar"), 0)
    s = live_switch(s, 110, cond("volcano"), 0)          # a third of a second later: same block
    s = live_switch(s, 200, cond("infrared"), 45)
    s = live_switch(s, 240, cond("vaporwave"), 45)       # still inside infrared's 45-frame transition
    s = live_switch(s, 400, cond("polar"), 0)            # long after: a block of its own
    assert [(seg.start, seg.prompts[0].preset) for seg in s.segments] == [
        (0, "cyberpunk"), (100, "volcano"), (200, "vaporwave"), (400, "polar")]
