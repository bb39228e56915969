"""`train --styles`: the looks a model learns, and each (recording, style)'s target frames.

`original` is the recording's own RGB (the engine's beauty pass). Every other style is that preset drawn by the
reference renderer over the same G-buffer (`style_targets.style_frames`, the teacher, the same frames that
`eval --styles` scores against): the report's structure-preserving restyle, the geometry the G-buffer's, the look
the preset's. Styles are drawn from the frames already decoded at the training size, so no G-buffer is read
twice. With our codec's latent cache each
(recording, style) is rendered and encoded once and only its latents are kept; without it (targets encoded per
batch) the rendered frames are kept in memory, also rendered once.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

import torch

from prompt_presets.phrasings import phrasings
from prompt_presets.presets import find_preset, preset_names
from training.errors import TrainingError
from training.style_targets import ORIGINAL, PairedFrames, style_frames

if TYPE_CHECKING:
    from renderer.base import Renderer

ALL = "all"


def parse_styles(spec: str) -> tuple[str, ...]:
    """'original,cyberpunk,...' or 'all' → preset names (aliases and any case accepted), each once, in order."""
    names: list[str] = []
    for part in (p.strip() for p in spec.split(",")):
        if not part:
            continue
        if part.lower() == ALL:
            names += preset_names()
            continue
        preset = find_preset(part)
        if preset is None:
            raise TrainingError(f"unknown style {part!r}; choose presets from {', '.join(preset_names())}, or all",
                                "--styles")
        names.append(preset.name)
    if not names:
        raise TrainingError("give at least one style (or all)", "--styles")
    return tuple(dict.fromkeys(names))


def per_clip(styles: Sequence[str] | None, clips: int) -> Sequence[str | None]:
    """Each clip's style, None for each where the run has no styles (the recording's own prompt and RGB)."""
    return styles or [None] * clips


class StyleTargets:
    """The styles of a run and their target frames; `keep` holds rendered frames for per-batch targets."""

    def __init__(self, names: tuple[str, ...], keep: bool = False):
        self.names = names
        self.keep = keep
        self._kept: dict[tuple[int, str], torch.Tensor] = {}
        self._reference: Renderer | None = None  # one reference renderer for every style drawn

    def phrasings(self, name: str) -> tuple[str, ...]:
        return phrasings(name)

    def frames(self, k: int, recording: PairedFrames, style: str) -> torch.Tensor:
        """uint8 (N, 3, H, W): recording k in `style`, at the recording's (training) size."""
        if style == ORIGINAL:
            return recording.rgb
        if (k, style) in self._kept:
            return self._kept[k, style]
        if self._reference is None:
            from renderer import create_renderer

            self._reference = create_renderer("reference")
        rgb = torch.from_numpy(style_frames(recording, style, renderer=self._reference)).permute(0, 3, 1, 2)
        if self.keep:
            self._kept[k, style] = rgb
        return rgb
