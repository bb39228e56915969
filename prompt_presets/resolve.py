"""Prompt text or preset name → the conditioning types every renderer consumes."""

from __future__ import annotations

from prompt_presets.conditioning import BlendMode, Conditioning, ConditioningError, WeightedPrompt
from prompt_presets.presets import find_preset


def resolve_prompt(text_or_name: str, weight: float = 1.0) -> WeightedPrompt:
    """A preset name (any case, '-'/' ' for '_') → that preset's full prompt; anything else is free text."""
    if not isinstance(text_or_name, str) or not text_or_name.strip():
        raise ConditioningError("empty prompt: give a preset name or a text")
    preset = find_preset(text_or_name)
    if preset is not None:
        return WeightedPrompt(preset.prompt, weight, preset.name)
    return WeightedPrompt(text_or_name.strip(), weight, None)


def conditioning_for(text_or_name: str, mode: BlendMode = "linear") -> Conditioning:
    return Conditioning((resolve_prompt(text_or_name),), mode)
