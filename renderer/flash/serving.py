"""What serving does to a loaded flash model so a live chunk costs less, with the same outputs (up to float rounding).

The transformer's steps: a chunk's denoising steps share their history, G-buffer latent and prompt, so serving
runs them as ChunkSteps (chunk_steps.py), which computes those parts once per chunk instead of once per step.
Its patchifiers compute as one matrix product (chunk_steps.patchify): oneDNN ran the long tier's (4, 8, 8)
Conv3d over 96 channels ~4x slower than the same sum as a product.

On a CPU the codec (G-buffer encoder, decoder, refiner) runs its convolutions channels-last: oneDNN runs the
narrow 3x3 convolutions of these small codecs 1.2-1.7x faster in that layout (16-18 channels at full size, measured
on 2-core AVX2 machines; BENCHMARKS.md "Flash live"), with the same arithmetic up to float rounding.
"""

from __future__ import annotations

import torch
from torch import nn

from renderer.flash.chunk_steps import supports
from renderer.flash.pipeline import FlashPipeline


def share_chunk_steps(pipeline: FlashPipeline) -> bool:
    """Let `pipeline` run each chunk's steps as ChunkSteps where they compute what the library's forward does
    (chunk_steps.supports). → whether it does."""
    pipeline.shared_steps = supports(pipeline.transformer)
    return pipeline.shared_steps


def codec_channels_last(*modules: nn.Module | None) -> None:
    """Keep each module's 4-D weights channels-last (names and values unchanged); absent modules are skipped.
    Activations follow the weights' layout through oneDNN's convolutions, so callers pass tensors as before."""
    for module in modules:
        if module is not None:
            # Module.to takes memory_format (torch's documentation); torch's overloads for it leave it out
            module.to(memory_format=torch.channels_last)  # type: ignore[call-overload]
