"""Several flash sessions' chunks in one forward pass: what lets one GPU serve more than one visitor.

Each session prepares its chunk alone (its G-buffer encoder memory, its prompt, noise from its own generator,
its history), the denoising steps run once for the whole batch (the transformer is the cost), and each session
finishes alone (its history, its stateful decoder). The transformer treats batch rows independently, so a
session's frames are the same, within float tolerance, whether it ran alone or beside others: the test is
tests/test_flash_batch.py. Sessions that cannot share a pass (another pipeline, size or chunk length) are
rendered in groups of their own.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Sequence

import torch

from gbuffer.frame import GBufferFrame
from prompt_presets.conditioning import Conditioning
from renderer.base import RenderResult
from renderer.flash.history import HistoryInputs
from renderer.flash.session import FlashSession, PreparedChunk


def render_batch(sessions: Sequence[FlashSession], frames: Sequence[Sequence[GBufferFrame]],
                 conditioning: Sequence[Sequence[Conditioning]]) -> list[RenderResult | Exception]:
    """Render one chunk for each session; → each one's result, or the exception its chunk raised (a bad chunk
    fails its own session only; a failure of a shared pass fails the sessions in it)."""
    if not (len(sessions) == len(frames) == len(conditioning)):
        raise ValueError("one chunk of frames and conditioning per session")
    out: list = [None] * len(sessions)
    prepared: dict[int, PreparedChunk] = {}
    for i, (session, f, c) in enumerate(zip(sessions, frames, conditioning)):
        try:
            prepared[i] = session.prepare(f, c)
        except Exception as exc:  # noqa: BLE001 - that session's error
            out[i] = exc
    groups: dict[tuple, list[int]] = defaultdict(list)
    for i, chunk in prepared.items():
        groups[(id(sessions[i].pipeline), tuple(chunk.noise.shape))].append(i)
    for members in groups.values():
        try:
            latents = _denoise_together([sessions[i] for i in members], [prepared[i] for i in members])
        except Exception as exc:  # noqa: BLE001 - the shared pass failed: every session in it
            for i in members:
                out[i] = exc
            continue
        for i, latent in zip(members, latents):
            try:
                out[i] = sessions[i].finish(prepared[i], latent)
            except Exception as exc:  # noqa: BLE001
                out[i] = exc
    return out


def _denoise_together(sessions: list[FlashSession], chunks: list[PreparedChunk]) -> list[torch.Tensor]:
    pipe = sessions[0].pipeline

    def on_step(i: int) -> None:
        for chunk in chunks:            # every session spent the whole batched step
            chunk.timer.lap(f"denoise_step_{i}")

    with torch.inference_mode():
        latent = pipe.denoise(torch.cat([c.noise for c in chunks]), torch.cat([c.gbuffer_latent for c in chunks]),
                              torch.cat([c.prompt for c in chunks]), stack_history([c.history for c in chunks]),
                              on_step=on_step, fresh_noise=lambda: torch.cat([c.fresh_noise() for c in chunks]))
    return list(latent.split(1))


def stack_history(histories: list[HistoryInputs]) -> HistoryInputs:
    """Batch rows of history inputs: latents stacked; positions are the same for every row (one layout)."""
    first = histories[0]
    return HistoryInputs(short=torch.cat([h.short for h in histories]), mid=torch.cat([h.mid for h in histories]),
                         long=torch.cat([h.long for h in histories]),
                         indices_short=first.indices_short.expand(len(histories), -1),
                         indices_mid=first.indices_mid.expand(len(histories), -1),
                         indices_long=first.indices_long.expand(len(histories), -1),
                         indices_chunk=first.indices_chunk.expand(len(histories), -1))
