"""What serving does to a loaded flash model so a live chunk costs less, without changing one output value.

The history tiers do not change while a chunk is denoised, yet Helios's forward patchifies them again at each of
the few steps. On a CPU the long tier's patchifier (a Conv3d of kernel (4, 8, 8) over 96 channels) was the
single largest op of a nano chunk (bench/flash_live_bench.py, BENCHMARKS.md): each history patchifier therefore
answers a repeated input with its previous output, compared by value, so the answer is the same tensor it
would compute.
"""

from __future__ import annotations

import torch
from torch import nn

HISTORY_PATCHIFIERS = ("patch_short", "patch_mid", "patch_long")


class LastCall:
    """A module's forward that returns its previous output when called again with an equal input (inference
    only: with gradients on it always computes)."""

    def __init__(self, module: nn.Module):
        self.forward = module.forward
        # (input, output), replaced whole: sessions on other threads share the model and read it unlocked
        self.last: tuple[torch.Tensor, torch.Tensor] | None = None
        self.hits = 0

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        if torch.is_grad_enabled():
            return self.forward(x)
        last = self.last
        if (last is not None and x.shape == last[0].shape and x.dtype == last[0].dtype
                and x.device == last[0].device and torch.equal(x, last[0])):
            self.hits += 1
            return last[1]
        out = self.forward(x)
        self.last = (x.clone(), out)
        return out


def reuse_history_patches(transformer: nn.Module) -> dict[str, LastCall]:
    """Give each history patchifier of `transformer` a LastCall forward (state-dict names unchanged; once per
    model). → the LastCall of each, by name."""
    calls = {}
    for name in HISTORY_PATCHIFIERS:
        module = getattr(transformer, name, None)
        if module is None:
            continue
        if not isinstance(module.forward, LastCall):
            module.forward = LastCall(module)
        calls[name] = module.forward
    return calls
