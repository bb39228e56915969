"""Prompt control, measured: does the output show the style it was asked for?

    accuracy      share of frames whose output is nearer (PSNR) to its own style's target than to every other
                  candidate style's target (training/style_targets.py), per style and over all
    paraphrases   the same for free text the model was never trained on, each naming one style
    eight worlds  the report's 637-frame rollout (timeline/schedules/eight_worlds.json: eight styles, a switch
                  every five chunks), per segment: accuracy; `settle_frames`, how many frames after the switch
                  until the output is its new style for the rest of the segment (None: not by its end); and
                  `structure`, the edges of the output against the G-buffer's geometry edges (mean IoU,
                  renderer/flash/probe.py), compared first segment against last
A random model scores about 1 / (number of styles); the measurement itself is checked on outputs that are
exactly a style's target (tests/test_eval.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np
import torch

from renderer.flash.probe import edge_overlap
from training.metrics import psnr

# Held out: no training phrasing may use these (they measure how free text generalises). Each names one preset.
PARAPHRASES: dict[str, str] = {
    "a frozen polar landscape at dawn": "polar",
    "rain-soaked streets glowing with pink and teal signs at night": "cyberpunk",
    "rivers of molten rock under a sky of ash": "volcano",
    "a desert road swallowed by a brown dust storm": "sandstorm",
    "a pastel eighties dream of pink sunsets and chrome": "vaporwave",
    "everything gilded in heavenly golden light": "holy_gold",
    "far below the waves where blue light barely reaches": "deep_sea",
    "seen through a thermal camera, warm things glowing": "infrared",
    "the plain look of the game, nothing changed": "original",
    "a clear summer afternoon with a bright blue sky": "bright_sunny",
    "thick fresh snow covering every surface in winter": "snowy_winter",
    "an orange dusk with long dramatic shadows": "sunset_dramatic",
    "magenta and cyan neon lights over a dark metropolis": "cyberpunk_neon",
    "a sunken world with shimmering light from above": "underwater",
    "fallen leaves and warm amber trees in october": "autumn_warm",
    "cold silver moonlight over a sleeping land": "moonlit_night",
}


def nearest_style(output: np.ndarray, targets: dict[str, np.ndarray]) -> str:
    """The style whose target frame is nearest to `output` by PSNR (ties: the first in `targets`)."""
    return max(targets, key=lambda style: psnr(output, targets[style]))


@dataclass
class StyleAccuracy:
    """Counts, per asked-for style, how many frames came out nearest to that style's target."""

    frames: dict[str, int] = field(default_factory=dict)
    hits: dict[str, int] = field(default_factory=dict)

    def update(self, asked: str, output: np.ndarray, targets: dict[str, np.ndarray]) -> bool:
        hit = nearest_style(output, targets) == asked
        self.frames[asked] = self.frames.get(asked, 0) + 1
        self.hits[asked] = self.hits.get(asked, 0) + hit
        return hit

    def summary(self) -> dict:
        total = sum(self.frames.values())
        return {"accuracy": round(sum(self.hits.values()) / total, 4) if total else None, "frames": total,
                "by_prompt": {s: round(self.hits[s] / n, 4) for s, n in self.frames.items()}}


def settle_frames(hits: Sequence[bool]) -> int | None:
    """Frames from a segment's start until every later frame is its style; None if its last frame is not."""
    if not hits or not hits[-1]:
        return None
    k = len(hits)
    while k > 0 and hits[k - 1]:
        k -= 1
    return k


def structure(rgb: np.ndarray, gbuffer: np.ndarray) -> float:
    """Mean IoU of the output's edges with the G-buffer's geometry edges: rgb uint8 (T, H, W, 3), gbuffer
    uint8 (T, 5, H, W, 3)."""
    r = torch.from_numpy(rgb).permute(0, 3, 1, 2).float() / 255
    g = torch.from_numpy(gbuffer).permute(0, 1, 4, 2, 3).float() / 255
    return edge_overlap(r, g, offsets=(0,))[0]


def segment_report(starts: Sequence[int], styles: Sequence[str], hits: Sequence[bool], rgb: np.ndarray,
                   gbuffer: np.ndarray) -> dict:
    """Per segment of a rollout (segment k covers frames starts[k] .. starts[k+1] - 1 of those rendered):
    accuracy, settle_frames and structure; plus structure first vs last and the mean accuracy."""
    ends = [*starts[1:], len(hits)]
    segments: list[dict[str, Any]] = []
    for start, end, style in zip(starts, ends, styles):
        end = min(end, len(hits))
        if end <= start:
            break
        seg = list(hits[start:end])
        segments.append({"style": style, "start": start, "frames": end - start,
                         "accuracy": round(sum(seg) / len(seg), 4), "settle_frames": settle_frames(seg),
                         "structure": round(structure(rgb[start:end], gbuffer[start:end]), 4)})
    first, last = segments[0]["structure"], segments[-1]["structure"]
    return {"frames": len(hits), "accuracy": round(sum(hits) / len(hits), 4), "segments": segments,
            "structure_first": first, "structure_last": last,
            "structure_ratio": round(last / first, 4) if first > 0 else None}
