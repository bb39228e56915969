"""Per-frame conditioning: a weighted blend of prompts.

The schedule produces one `Conditioning` per frame; every renderer consumes it. A prompt is either a preset
(by its short name) or free text. Weights are normalised to sum to 1. `mode` says how a renderer that works on
embeddings should mix them: "linear" (weighted sum) or "slerp" (spherical, for two prompts).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from alaya_errors import UserError

BlendMode = Literal["linear", "slerp"]


class ConditioningError(UserError):
    """An empty prompt, a negative weight or an unknown preset."""


@dataclass(frozen=True)
class WeightedPrompt:
    """One prompt in a blend. `preset` is the preset's short name when the prompt is a preset, else None;
    `text` is always the full prompt text a neural renderer receives."""

    text: str
    weight: float = 1.0
    preset: str | None = None


@dataclass(frozen=True)
class Conditioning:
    prompts: tuple[WeightedPrompt, ...]
    mode: BlendMode = "linear"

    def __post_init__(self) -> None:
        if not self.prompts:
            raise ConditioningError("a conditioning needs at least one prompt")
        for p in self.prompts:
            if not p.text.strip():
                raise ConditioningError("empty prompt text")
            if not p.weight >= 0:
                raise ConditioningError(f"weight {p.weight} of prompt {p.text[:40]!r} is negative or NaN")
        total = sum(p.weight for p in self.prompts)
        if total <= 0:
            raise ConditioningError("prompt weights sum to zero")
        if abs(total - 1.0) > 1e-9:
            object.__setattr__(self, "prompts", tuple(
                WeightedPrompt(p.text, p.weight / total, p.preset) for p in self.prompts))

    @classmethod
    def single(cls, text: str, preset: str | None = None) -> "Conditioning":
        return cls((WeightedPrompt(text, 1.0, preset),))

    @property
    def dominant(self) -> WeightedPrompt:
        """The prompt with the largest weight (first on ties): what a status line shows."""
        return max(self.prompts, key=lambda p: p.weight)

    def label(self) -> str:
        """Short human-readable form, e.g. 'cyberpunk 0.70 + volcano 0.30'."""
        parts = [(p.preset or shortened(p.text, 32)) for p in self.prompts]
        if len(parts) == 1:
            return parts[0]
        return " + ".join(f"{n} {p.weight:.2f}" for n, p in zip(parts, self.prompts))

    def to_json(self) -> dict:
        return {"mode": self.mode,
                "prompts": [{"text": p.text, "weight": round(p.weight, 6), "preset": p.preset}
                            for p in self.prompts]}


def shortened(text: str, limit: int) -> str:
    """`text` in at most `limit` characters: whole, else cut at a word boundary with an ellipsis."""
    if len(text) <= limit:
        return text
    cut = text[:limit - 1]
    if " " in cut.strip():
        cut = cut[:cut.rstrip().rfind(" ")]
    return cut.rstrip(" ,.;:") + "…"
