"""Style presets (data files) and prompt → conditioning helpers. Knows nothing of servers."""

from prompt_presets.conditioning import BlendMode, Conditioning, ConditioningError, WeightedPrompt
from prompt_presets.presets import (
    ORIGINAL_STYLES,
    REPORT_STYLES,
    Preset,
    PresetError,
    get_preset,
    load_presets,
    preset_names,
)
from prompt_presets.reference_params import ReferenceParams, blend_params
from prompt_presets.resolve import conditioning_for, resolve_prompt
from prompt_presets.spec import PromptSpec

__all__ = [
    "BlendMode",
    "Conditioning",
    "ConditioningError",
    "ORIGINAL_STYLES",
    "REPORT_STYLES",
    "Preset",
    "PresetError",
    "PromptSpec",
    "ReferenceParams",
    "WeightedPrompt",
    "blend_params",
    "conditioning_for",
    "get_preset",
    "load_presets",
    "preset_names",
    "resolve_prompt",
]
