"""A style's target frames: what a model trained or scored on style NAME should produce over a recording.

    original   the recording's own RGB (the engine's beauty pass)
    NAME       the reference renderer's preset NAME drawn over the recording's own G-buffer (the teacher)

One function, `style_frames`, used by both sides so that they agree frame for frame: training's per-style
target cache (training/styles.py) and `alaya-studio eval --styles` (the targets each output is scored against,
and the per-pixel baseline's fitting targets). Deterministic: the reference renderer has no randomness, and
frame i is drawn at time i / fps (its animated effects, caustics and haze, read the time), not at the recording's
timestamps, which a `Recording` does not keep.
"""

from __future__ import annotations

from typing import Protocol, Sequence

import numpy as np
import torch

from gbuffer.frame import GBufferFrame
from prompt_presets.presets import get_preset
from prompt_presets.resolve import conditioning_for

ORIGINAL = "original"
TARGET_FPS = 30.0            # the time base of animated effects (the studio's default rate)
RENDER_BLOCK = 16            # frames per reference render call (its MAX_CHUNK)


class PairedFrames(Protocol):
    """What `style_frames` reads: training.data.Recording has exactly these."""

    gbuffer: torch.Tensor    # (N, 5, 3, H, W) uint8
    rgb: torch.Tensor        # (N, 3, H, W) uint8


def style_name(style: str) -> str:
    """'Holy Gold' / 'holy-gold' / an alias → the preset's name; an unknown name is a PresetError (one line)."""
    return get_preset(style).name


def gbuffer_frames(recording: PairedFrames, indices: Sequence[int], fps: float = TARGET_FPS) -> list[GBufferFrame]:
    """The recording's frames `indices` as GBufferFrames (uint8 (5, H, W, 3)) at time i / fps."""
    data = recording.gbuffer[list(indices)].permute(0, 1, 3, 4, 2).contiguous().numpy()
    return [GBufferFrame(i, i / fps, d) for i, d in zip(indices, data)]


def style_frames(recording: PairedFrames, style: str, indices: Sequence[int] | None = None, *,
                 fps: float = TARGET_FPS, renderer=None) -> np.ndarray:
    """uint8 (len(indices), H, W, 3): the target of `style` (a preset name) for frames `indices` (default all).

    `renderer`: a reference renderer to reuse (default: a new one, torch or GL as `create_renderer` picks;
    the two backends agree to within half an 8-bit level on average, tests/test_reference_golden.py)."""
    n = recording.gbuffer.shape[0]
    indices = list(range(n)) if indices is None else list(indices)
    name = style_name(style)
    if name == ORIGINAL:
        return recording.rgb[indices].permute(0, 2, 3, 1).contiguous().numpy()
    if renderer is None:
        from renderer import create_renderer

        renderer = create_renderer("reference")
    h, w = recording.gbuffer.shape[-2:]
    out = np.empty((len(indices), h, w, 3), np.uint8)
    conditioning = conditioning_for(name)
    with renderer.open_session(w, h) as session:
        for start in range(0, len(indices), RENDER_BLOCK):
            frames = gbuffer_frames(recording, indices[start:start + RENDER_BLOCK], fps)
            out[start:start + len(frames)] = session.render(frames, [conditioning] * len(frames)).rgb
    return out
