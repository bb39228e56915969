"""Conditioning → the style the shader applies: preset parameters blended by weight, as tensors.

- A prompt naming a preset uses that preset's `reference` parameters.
- Free text maps to the nearest presets by meaning (prompt_presets.matching) and uses their blend.
- A blend of prompts is the weighted field-wise blend of their parameters. "slerp" mode has no embedding to
  rotate here, so it reshapes the weights instead: two prompts at weight t get the spherical-interpolation
  coefficients for a quarter turn, sin((1−t)·π/2) and sin(t·π/2), renormalised; more than two mix linearly.
Results are cached per Conditioning: a schedule repeats the same one for many frames.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from dataclasses import dataclass, fields

import torch

from prompt_presets.conditioning import Conditioning
from prompt_presets.matching import nearest_presets
from prompt_presets.presets import find_preset, get_preset, load_presets
from prompt_presets.reference_params import ReferenceParams, blend_params


def prompt_blend(conditioning: Conditioning) -> list[tuple[str, float]]:
    """The conditioning as (preset name, weight) pairs, free text already mapped; weights sum to 1."""
    weights = [p.weight for p in conditioning.prompts]
    if conditioning.mode == "slerp" and len(weights) == 2:
        t = weights[1]
        a, b = math.sin((1 - t) * math.pi / 2), math.sin(t * math.pi / 2)
        weights = [a / (a + b), b / (a + b)]
    out: dict[str, float] = {}
    for prompt, w in zip(conditioning.prompts, weights):
        for name, share in _prompt_presets(prompt.text, prompt.preset):
            out[name] = out.get(name, 0.0) + w * share
    return list(out.items())


def _prompt_presets(text: str, preset: str | None) -> tuple[tuple[str, float], ...]:
    if preset is not None:
        return ((get_preset(preset).name, 1.0),)
    named = find_preset(text) or next((p for p in load_presets().values() if p.prompt == text.strip()), None)
    if named is not None:
        return ((named.name, 1.0),)
    return nearest_presets(text)


@dataclass(frozen=True)
class Style:
    """ReferenceParams on a device: vec3 fields as (3, 1, 1) tensors, scalars as floats, directions unit."""

    params: ReferenceParams
    blend: tuple[tuple[str, float], ...]
    vec: dict[str, torch.Tensor]

    def __getattr__(self, name: str):
        vec = object.__getattribute__(self, "vec")
        if name in vec:
            return vec[name]
        return getattr(object.__getattribute__(self, "params"), name)


def make_style(params: ReferenceParams, device: torch.device,
               blend: tuple[tuple[str, float], ...] = ()) -> Style:
    vec = {}
    for f in fields(params):
        value = getattr(params, f.name)
        if isinstance(value, tuple):
            t = torch.tensor(value, dtype=torch.float32, device=device).view(3, 1, 1)
            if f.name.endswith("_direction"):
                t = t / t.norm().clamp_min(1e-6)
            vec[f.name] = t
    return Style(params, blend, vec)


class StyleCache:
    """Conditioning → Style, least recently used first out."""

    def __init__(self, device: torch.device, size: int = 64):
        self.device, self.size = device, size
        self._cache: OrderedDict[Conditioning, Style] = OrderedDict()

    def get(self, conditioning: Conditioning) -> Style:
        style = self._cache.get(conditioning)
        if style is None:
            blend = tuple(prompt_blend(conditioning))
            params = blend_params((get_preset(name).reference, w) for name, w in blend)
            style = make_style(params, self.device, blend)
            self._cache[conditioning] = style
            if len(self._cache) > self.size:
                self._cache.popitem(last=False)
        else:
            self._cache.move_to_end(conditioning)
        return style
