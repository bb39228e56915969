"""What serving does to a loaded flash model so a live chunk costs less, with the same outputs (up to float rounding).

The history tiers do not change while a chunk is denoised, yet Helios's forward patchifies them again at each of
the few steps. On a CPU the long tier's patchifier (a Conv3d of kernel (4, 8, 8) over 96 channels) was the
single largest op of a nano chunk (BENCHMARKS.md, "Flash live"). So each history patchifier answers a repeated
input with its previous output, compared by value (the same tensor it would compute), and the long one, whose
(4, 8, 8) kernel oneDNN runs ~4x slower than the same sum as one matrix product, computes as that product (equal
to the convolution up to float rounding).

On a CPU the codec (G-buffer encoder, decoder, refiner) runs its convolutions channels-last: oneDNN runs the
narrow 3x3 convolutions of these small codecs 1.2-1.7x faster in that layout (16-18 channels at full size, measured
on 2-core AVX2 machines; BENCHMARKS.md "Flash live"), with the same arithmetic up to float rounding.
"""

from __future__ import annotations

from typing import Callable

import torch
import torch.nn.functional as F
from torch import nn

HISTORY_PATCHIFIERS = ("patch_short", "patch_mid", "patch_long")


class LastCall:
    """A module's forward that returns its previous output when called again with an equal input (inference
    only: with gradients on it always computes)."""

    def __init__(self, compute: Callable[[torch.Tensor], torch.Tensor]):
        self.compute = compute
        # (input, output), replaced whole: sessions on other threads share the model and read it unlocked
        self.last: tuple[torch.Tensor, torch.Tensor] | None = None
        self.hits = 0

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        if torch.is_grad_enabled():
            return self.compute(x)
        last = self.last
        if (last is not None and x.shape == last[0].shape and x.dtype == last[0].dtype
                and x.device == last[0].device and torch.equal(x, last[0])):
            self.hits += 1
            return last[1]
        out = self.compute(x)
        self.last = (x.clone(), out)
        return out


def patchify_as_matmul(conv: nn.Conv3d):
    """A Conv3d whose stride is its kernel (patches that do not overlap, no padding) as one matrix product:
    x (B, C, T, H, W) → (B, O, T/pt, H/ph, W/pw); a remainder that fills no whole patch is dropped, as the
    convolution drops it."""
    assert tuple(conv.stride) == tuple(conv.kernel_size) and conv.groups == 1 and not any(conv.padding)

    def forward(x: torch.Tensor) -> torch.Tensor:
        o, c, pt, ph, pw = conv.weight.shape
        b, _, t, h, w = x.shape
        t, h, w = t // pt, h // ph, w // pw
        patches = (x[:, :, :t * pt, :h * ph, :w * pw].reshape(b, c, t, pt, h, ph, w, pw)
                   .permute(0, 2, 4, 6, 1, 3, 5, 7).reshape(b, t, h, w, c * pt * ph * pw))
        return F.linear(patches, conv.weight.reshape(o, -1), conv.bias).permute(0, 4, 1, 2, 3)
    return forward


def reuse_history_patches(transformer: nn.Module) -> dict[str, LastCall]:
    """Give each history patchifier of `transformer` a LastCall forward, an instance attribute (state-dict names
    unchanged; `del module.forward` restores the library's). → the LastCall of each, by name."""
    calls = {}
    for name in HISTORY_PATCHIFIERS:
        module = getattr(transformer, name, None)
        if module is None:
            continue
        if not isinstance(module.forward, LastCall):
            module.forward = LastCall(patchify_as_matmul(module) if name == "patch_long" else module.forward)
        calls[name] = module.forward
    return calls


def codec_channels_last(*modules: nn.Module | None) -> None:
    """Keep each module's 4-D weights channels-last (names and values unchanged); absent modules are skipped.
    Activations follow the weights' layout through oneDNN's convolutions, so callers pass tensors as before."""
    for module in modules:
        if module is not None:
            module.to(memory_format=torch.channels_last)
