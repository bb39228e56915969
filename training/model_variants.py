"""A flash model with a part taken away or swapped, and how eval streams any of them.

The ablations (training/ablations.py) score the model without its refiner and without its transformer; the guide
refit (training/guide_fit.py) is fed the TAEHV stack's frames, the guide dropped. Each variant is a copy: the
renderer it was made from keeps every part it had.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterator

import numpy as np
import torch

from prompt_presets.conditioning import Conditioning
from prompt_presets.resolve import conditioning_for

if TYPE_CHECKING:
    from renderer.base import Renderer
    from renderer.flash.guide import GBufferGuide


def with_pipeline(renderer, pipe) -> Renderer:
    """A copy of a flash renderer whose sessions run `pipe` (the renderer itself is left as it was)."""
    out = copy.copy(renderer)
    out.pipeline = pipe
    return out


def decoder_only(renderer) -> Renderer | None:
    """A flash renderer whose sessions stop at the decoder (None where there is no refiner to take away)."""
    pipe = getattr(renderer, "pipeline", None)
    if pipe is None or pipe.refiner is None:
        return None
    without_refiner = copy.copy(pipe)
    without_refiner.refiner = None
    return with_pipeline(renderer, without_refiner)


def without_transformer(pipe, refiner=None):
    """`pipe` with every chunk's denoised latent a zero latent (no transformer runs) and `refiner` after the
    decoder (None: the decoder's frames)."""
    out = copy.copy(pipe)
    out.refiner = refiner
    out.shared_steps = False
    out.denoise = lambda noise, *args, **kwargs: torch.zeros(noise.shape, device=pipe.device)
    out.history_tokens_ahead = lambda history: None
    return out


def with_guide(pipe, guide: GBufferGuide | None):
    """`pipe` whose decoder ends in `guide` (None: at the TAEHV stack). The decoder is deep-copied: a shallow copy
    shares its submodule table, so setting its guide would change the original's too."""
    out = copy.copy(pipe)
    out.decoder = copy.deepcopy(pipe.decoder)
    out.decoder.guide = None if guide is None else guide.to(pipe.device, pipe.dtype).eval()
    return out


def stack_only(renderer) -> Renderer:
    """A copy of a guided flash renderer whose sessions stop at the TAEHV stack (the renderer keeps its guide)."""
    return with_pipeline(renderer, with_guide(renderer.pipeline, None))


@dataclass(frozen=True)
class OnePrompt:
    """The task's prompt at every frame. A rollout reads nothing of its timeline but `conditioning_at`, and this
    one answers as a single-prompt schedule does (Schedule.single(p).conditioning_at(i) == conditioning_for(p)),
    so training needs no schedule class for it."""

    conditioning: Conditioning

    def conditioning_at(self, frame: int) -> Conditioning:
        return self.conditioning


def streamed_frames(renderer, test, task, seed: int) -> Iterator[tuple[int, np.ndarray]]:
    """`renderer` streamed over `test` with the task's prompt, as eval streams the model (the same rollout)."""
    from training.eval_tasks import render_stream

    for r in render_stream(renderer, test.source(), OnePrompt(conditioning_for(task.prompt)), seed):
        yield r.index, r.rgb
