"""Session timeline helpers: the offer's prompt/schedule → a Schedule, and data-channel prompt messages →
Conditioning and recorded switches. The schedule itself (format, blending, validation) is `studio.schedule`."""

from __future__ import annotations

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


def player_input(msg: dc.Input) -> PlayerInput:
    return PlayerInput(msg.steer, msg.throttle, msg.brake, msg.reset)
