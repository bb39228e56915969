"""One prompt of a blend or a schedule segment: a preset by name, or free text, with a weight. The one
definition, shared by the schedule format (timeline/schedule) and the data-channel messages (webrtc/protocol.py),
which is why it lives here, below both."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from alaya_errors import UserError, field_error
from prompt_presets.conditioning import WeightedPrompt
from prompt_presets.presets import PresetError, get_preset, preset_names
from prompt_presets.resolve import resolve_prompt


MAX_TEXT = 2000


class PromptSpec(BaseModel):
    """A preset by name, or text (text that is a preset name means that preset); "cyberpunk" is short for
    {"text": "cyberpunk"}."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    # bounded because every front door (offers, feeds, gRPC, the data channel) matches text to presets: 2,000
    # characters is a paragraph, and a megabyte of it was CPU spent for nobody (issue 42)
    preset: str | None = Field(None, max_length=100, description="a preset's short name, e.g. 'cyberpunk'")
    text: str | None = Field(None, max_length=MAX_TEXT, description="free text, or a preset name")
    weight: float = Field(1.0, ge=0, allow_inf_nan=False, description="relative weight; a segment's sum > 0")

    @model_validator(mode="before")
    @classmethod
    def _shorthand(cls, data: Any) -> Any:
        if isinstance(data, str):                     # "cyberpunk" → the preset; other text stays text
            data = {"text": data}
        if (isinstance(data, dict) and "preset" not in data and isinstance(data.get("text"), str)
                and data["text"].strip()):
            prompt = resolve_prompt(data["text"])     # the one resolver: {"text": "Holy Gold"} is holy_gold
            if prompt.preset:
                data = {**{k: v for k, v in data.items() if k != "text"}, "preset": prompt.preset}
        return data

    @field_validator("text")
    @classmethod
    def _text(cls, v: str | None) -> str | None:
        if v is not None and not v.strip():
            raise ValueError("empty prompt")
        return v.strip() if v is not None else v

    @field_validator("preset")
    @classmethod
    def _preset(cls, v: str | None) -> str | None:
        if v is None:
            return v
        try:
            return get_preset(v).name                 # canonical: 'Holy Gold' → 'holy_gold'
        except PresetError:
            raise ValueError(f"unknown preset {v!r} (known: {', '.join(preset_names())})") from None

    @model_validator(mode="after")
    def _one_of(self) -> "PromptSpec":
        if (self.preset is None) == (self.text is None):
            raise field_error("give exactly one of 'preset' or 'text'")
        return self

    @classmethod
    def from_weighted(cls, prompt: WeightedPrompt) -> "PromptSpec":
        """The spec of a prompt built in code (keyframe text, a constant schedule's prompt): too long a text is
        one line here, not a validation trace."""
        if prompt.preset:
            return cls(preset=prompt.preset, weight=prompt.weight)
        if len(prompt.text) > MAX_TEXT:
            raise UserError(f"a prompt of {len(prompt.text)} characters; at most {MAX_TEXT} characters", "prompt")
        return cls(text=prompt.text, weight=prompt.weight)

    def resolve(self) -> WeightedPrompt:
        if self.preset is not None:
            preset = get_preset(self.preset)
            return WeightedPrompt(preset.prompt, self.weight, preset.name)
        assert self.text is not None        # _one_of: exactly one of preset and text
        return resolve_prompt(self.text, self.weight)
