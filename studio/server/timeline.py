"""Session timeline helpers: the offer's prompt/schedule → a Schedule, and data-channel prompt messages →
Conditioning and recorded switches. The schedule itself (format, blending, validation) is `studio.schedule`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gbuffer.input import PlayerInput
from prompt_presets import Conditioning, PromptSpec, resolve_prompt
from prompt_presets.matching import matching_ready
from studio.schedule import Schedule, ScheduleError, schedule_from_value
from webrtc import protocol as dc

DEFAULT_PROMPT = "cyberpunk"


def initial_schedule(schedule: dict[str, Any] | str | None, prompt: str | None, fps: float) -> Schedule:
    """What an offer asks for: a schedule (JSON object, built-in name, keyframe/Parseq text) or one prompt."""
    if schedule is not None and prompt is not None:
        raise ScheduleError("give 'schedule' or 'prompt', not both", "offer")
    if schedule is not None:
        return schedule_from_value(schedule, "schedule")
    return Schedule.single(prompt or DEFAULT_PROMPT, fps=fps)


def conditioning_from_specs(prompts: list[PromptSpec], mode: str = "linear") -> Conditioning:
    return Conditioning(tuple(p.resolve() for p in prompts), mode)  # type: ignore[arg-type]


def conditioning_from_message(msg) -> Conditioning:
    """A prompt / preset / blend message → Conditioning (unknown presets raise PresetError)."""
    if msg.type == "prompt":
        return Conditioning((resolve_prompt(msg.text),))
    if msg.type == "preset":
        from prompt_presets import get_preset

        preset = get_preset(msg.name)
        return Conditioning((resolve_prompt(preset.name),))
    return conditioning_from_specs(msg.prompts, msg.mode)


def needs_text_matching(conditioning: Conditioning) -> bool:
    """Free text is rendered through the preset matcher, which may still be loading its model."""
    return any(p.preset is None for p in conditioning.prompts) and not matching_ready()


def schedule_from_message(msg: dc.SetSchedule) -> Schedule:
    if (msg.schedule is None) == (msg.text is None):
        raise dc.ProtocolError("give exactly one of 'schedule' (JSON) or 'text'", "schedule message")
    return schedule_from_value(msg.schedule if msg.schedule is not None else msg.text, "schedule")


def switch(schedule: Schedule, frame: int, conditioning: Conditioning, transition: int) -> Schedule:
    """`schedule` with a switch to `conditioning` at timeline `frame` (wrapped into a looping schedule)."""
    if schedule.loop and schedule.length:
        frame %= schedule.length
    return schedule.switch_at(frame, conditioning, transition, mode=conditioning.mode)


def live_switch(schedule: Schedule, frame: int, conditioning: Conditioning, transition: int) -> Schedule:
    """A switch made live, coalesced (docs/ui.md): one that lands while the block it falls in is still in its
    transition, or less than a second after that block began (a slider drag, quick clicks), replaces that
    block's prompts instead of adding a block; the blend then runs on from where that block began."""
    if schedule.loop and schedule.length:
        frame %= schedule.length
    block = schedule.segment_at(frame)
    if block.start > 0 and frame - block.start < max(block.transition.frames, round(schedule.fps)):
        frame = block.start
    return schedule.switch_at(frame, conditioning, transition, mode=conditioning.mode)


MAX_CARRIED_PASSES = 64          # a transition longer than 64 passes of its loop simply ends there


@dataclass
class LoopSwitch:
    """A live switch on a loop (docs/ui.md, "Live switches on loops"): it blends in from the frame on screen
    over its transition, then holds for the whole loop. `now` plays the rest of this pass; each pass after
    takes the next of `passes` (a transition that runs past the loop's end carries on into the next pass),
    and the last one — the whole loop in the new prompts — stays."""

    now: Schedule
    passes: list[Schedule] = field(default_factory=list)


def loop_length(schedule: Schedule, recorded_frames: int | None) -> int | None:
    """Frames per pass when the timeline loops: a looping schedule's length, else a recorded source played
    in a loop (`recorded_frames`); None when nothing loops (a live engine on an open timeline)."""
    if schedule.loop and schedule.length:
        return schedule.length
    return recorded_frames or None


def loop_switch(schedule: Schedule, frame: int, length: int, conditioning: Conditioning,
                transition: int) -> LoopSwitch:
    position = frame % length
    mode = conditioning.mode
    now = schedule.switch_at(position, conditioning, transition, mode=mode)
    whole = schedule.switch_at(0, conditioning, mode=mode)
    passes, last, left = [], now, position + transition - length      # transition frames left at the wrap
    while transition > 0 and left > 0 and len(passes) < MAX_CARRIED_PASSES:
        at_wrap = last.conditioning_at(length - 1)                      # where the blend stands at the wrap
        last = whole.switch_at(0, at_wrap, mode=mode).switch_at(1, conditioning, left, mode=mode)
        passes.append(last)
        left -= length - 1
    return LoopSwitch(now, [*passes, whole])


def player_input(msg: dc.Input) -> PlayerInput:
    return PlayerInput(msg.steer, msg.throttle, msg.brake, msg.reset)
