"""Tiny G-buffer encoders: five G-buffer channels (each RGB) → 5x16 latent channels, 8x spatial, 4x temporal.

    frames (B, T, 5, 3, H, W) → latent (B, 80, T/4, H/8, W/8), channels grouped by G-buffer channel (albedo first)

The model card says "a shared tiny G-buffer encoder (one pass for all five channels)" and "grouped distilled
G-buffer encoder (5 branches, hidden dim 128)"; the file's layout is not public. So the encoder is built from the
checkpoint's own key/shape table, as one of three families (see `ENCODER_FAMILIES`):

  grouped   encoder.N.*            five branches side by side as grouped convs (groups=5) in one Sequential;
                                   no memory across chunks (our design: gconv, GroupedTPool, GroupedResBlock)
  branches  branches.K.N.* or      five independent TAEHV encoders (conv, TPool, MemBlock), one per channel,
            encoders.K.N.*         each → 16 latent channels
  shared    encoder.N.* + fusion.* one TAEHV encoder run on each channel (weights shared), its five outputs
                                   concatenated and mixed by a 1x1 `fusion` conv → 80 channels

Widths, depth and temporal pooling come from the shapes: a 3x3 conv without bias is a stride-2 conv (TAEHV's
convention), a 1x1 `conv` whose input is k times its output is a TPool of stride k, `conv.0/2` a residual block,
`conv.0/2/4` a MemBlock, and a missing index a ReLU. A family matches only when the rebuilt module compresses
8x in space and 4x in time and reproduces every shape of the file.
"""

from __future__ import annotations

import math
import re
from typing import TypeGuard

import torch
from torch import nn

from renderer.flash.config import (GBUFFER_CHANNELS, LATENT_CHANNELS, SPATIAL_SCALE, TEMPORAL_SCALE, FlashConfig,
                                   InputRange)
from renderer.flash.families import Family
from renderer.flash.taehv import MemBlock, StreamMemory, TPool, init_signal_preserving, run_stream

G = GBUFFER_CHANNELS
Shapes = dict[str, tuple[int, ...]]


def gconv(n_in: int, n_out: int, stride: int = 1, bias: bool = True, groups: int = G) -> nn.Conv2d:
    return nn.Conv2d(n_in, n_out, 3, stride=stride, padding=1, groups=groups, bias=bias)


class GroupedTPool(nn.Module):
    """Merge `stride` consecutive frames per branch: (N*T, C, H, W) → (N*T/stride, C, H, W)."""

    def __init__(self, n_f: int, stride: int):
        super().__init__()
        self.stride = stride
        self.conv = nn.Conv2d(n_f * stride, n_f, 1, groups=G, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Per pixel one matrix product of the `stride` frames' values side by side (stride x C) with the grouped
        1x1 weight laid out dense (block-diagonal per frame): oneDNN's grouped 1x1 convolution over the frames
        regrouped was ~2x slower, and the regrouping a copy of its own. Output channels-last."""
        nt, c, h, w = x.shape
        frames = x.permute(0, 2, 3, 1).reshape(nt // self.stride, self.stride, h * w, c)    # (N*T/s, s, HW, C)
        rows = frames.transpose(1, 2).reshape(nt // self.stride, h * w, self.stride * c)    # (N*T/s, HW, s C)
        return (rows @ self.dense_weight()).unflatten(1, (h, w)).permute(0, 3, 1, 2)

    def dense_weight(self) -> torch.Tensor:
        """The grouped weight (C, s C/G, 1, 1), input channels (G, s, C/G), as (s C, C) for inputs (s, C)."""
        w = self.conv.weight.flatten(1)                                                     # (C, s Cg)
        cg = w.shape[0] // G
        per_frame = [torch.block_diag(*(w[g * cg:(g + 1) * cg, k * cg:(k + 1) * cg] for g in range(G)))
                     for k in range(self.stride)]                                           # s x (C out, C in)
        return torch.cat(per_frame, dim=1).T


class GroupedResBlock(nn.Module):
    def __init__(self, n_f: int):
        super().__init__()
        self.conv = nn.Sequential(gconv(n_f, n_f), nn.ReLU(inplace=True), gconv(n_f, n_f))
        self.act = nn.ReLU(inplace=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.act(self.conv(x) + x)


def grouped_encoder(hidden: int, stem_stride: int = 1) -> nn.Sequential:
    """Our design (random init): (N*T, 5*3, H, W) → (N*T/4, 5*16, H/8, W/8).

    stem_stride 2 moves the first 2x spatial step from the third stage into the stem: nothing then runs at full
    resolution but one convolution, which makes the encoder about 4x cheaper to train on a CPU (the `nano`
    config). The layer indices and shapes stay the same; only the bias marks which convs step (the loader's
    TAEHV convention), so both variants load through the same family."""
    if stem_stride not in (1, 2):
        raise ValueError(f"stem_stride must be 1 or 2, got {stem_stride}")
    n_f = G * hidden
    late_stride = 2 if stem_stride == 1 else 1
    return nn.Sequential(
        gconv(G * 3, n_f, stride=stem_stride, bias=stem_stride == 1), nn.ReLU(inplace=True),
        GroupedTPool(n_f, 2), gconv(n_f, n_f, stride=2, bias=False), GroupedResBlock(n_f),   # T/2
        GroupedTPool(n_f, 2), gconv(n_f, n_f, stride=2, bias=False), GroupedResBlock(n_f),   # T/4
        gconv(n_f, n_f, stride=late_stride, bias=late_stride == 1), GroupedResBlock(n_f),     # T/4, H/8
        gconv(n_f, G * LATENT_CHANNELS),
    )


# ---- a Sequential rebuilt from its key/shape table -------------------------------------------------------------
def layer_table(shapes: Shapes, prefix: str) -> dict[int, dict[str, tuple]]:
    """`prefix` + 'N.suffix' keys → {N: {suffix: shape}}."""
    table: dict[int, dict[str, tuple]] = {}
    for key, shape in shapes.items():
        m = re.fullmatch(re.escape(prefix) + r"(\d+)\.(.+)", key)
        if m:
            table.setdefault(int(m.group(1)), {})[m.group(2)] = tuple(shape)
    return table


def block_from_shapes(params: dict[str, tuple], groups: int) -> nn.Module | None:
    """One layer from its parameter shapes (TAEHV conventions, module docstring); None when unrecognised."""
    keys = set(params)
    if keys <= {"weight", "bias"} and len(params["weight"]) == 4 and params["weight"][2:] == (3, 3):
        out, per_group = params["weight"][:2]
        bias = "bias" in keys
        return gconv(per_group * groups, out, stride=1 if bias else 2, bias=bias, groups=groups)
    if keys == {"conv.weight"} and params["conv.weight"][2:] == (1, 1):
        out, per_group = params["conv.weight"][:2]
        stride, rem = divmod(per_group * groups, out)
        if rem or stride < 1:
            return None
        return GroupedTPool(out, stride) if groups > 1 else TPool(out, stride)
    if groups > 1 and keys == {"conv.0.weight", "conv.0.bias", "conv.2.weight", "conv.2.bias"}:
        return GroupedResBlock(params["conv.0.weight"][0])
    if groups == 1 and {"conv.0.weight", "conv.2.weight", "conv.4.weight"} <= keys:
        n_out, n_in2 = params["conv.0.weight"][:2]
        return MemBlock(n_in2 // 2, n_out)
    return None


def sequential_from_shapes(shapes: Shapes, prefix: str, groups: int = 1) -> nn.Sequential | None:
    table = layer_table(shapes, prefix)
    if not table:
        return None
    blocks = []
    for i in range(max(table) + 1):
        block = block_from_shapes(table[i], groups) if i in table else nn.ReLU(inplace=True)
        if block is None:
            return None
        blocks.append(block)
    return nn.Sequential(*blocks)


def compression(blocks: nn.Sequential) -> tuple[int, int]:
    """(spatial, temporal) downscale of an encoder Sequential."""
    spatial = math.prod(b.stride[0] for b in blocks if isinstance(b, nn.Conv2d))
    temporal = math.prod(b.stride for b in blocks if isinstance(b, (TPool, GroupedTPool)))
    return spatial, temporal


def fits(blocks: nn.Sequential | None, in_channels: int, out_channels: int) -> TypeGuard[nn.Sequential]:
    if blocks is None:
        return False
    convs = [b for b in blocks if isinstance(b, nn.Conv2d)]
    return bool(convs) and convs[0].in_channels == in_channels and convs[-1].out_channels == out_channels \
        and compression(blocks) == (SPATIAL_SCALE, TEMPORAL_SCALE)


# ---- the encoder ---------------------------------------------------------------------------------------------
class GBufferEncoder(nn.Module):
    """One of the families; `parts` are registered under the checkpoint's own names, so state-dict keys match."""

    # the parts a family registers (grouped, shared: encoder; shared: fusion; branches: `branch_attr`)
    encoder: nn.Sequential
    fusion: nn.Conv2d

    def __init__(self, family: str, parts: dict[str, nn.Module], input_range: InputRange = "0..1"):
        super().__init__()
        self.family, self.input_range = family, input_range
        for name, module in parts.items():
            self.add_module(name, module)
        self.branch_attr = next((n for n in ("branches", "encoders") if n in parts), None)

    @classmethod
    def grouped(cls, hidden: int = 128, input_range: InputRange = "0..1", stem_stride: int = 1) -> "GBufferEncoder":
        encoder = cls("grouped", {"encoder": grouped_encoder(hidden, stem_stride)}, input_range)
        init_signal_preserving(encoder)
        return encoder

    @classmethod
    def for_config(cls, config: FlashConfig) -> "GBufferEncoder":
        """A randomly initialised grouped encoder of the config's widths (what from-scratch models start from)."""
        return cls.grouped(config.gbuffer_hidden, config.gbuffer_input_range, config.gbuffer_stem_stride)

    def forward(self, frames: torch.Tensor, memory: StreamMemory | None = None) -> torch.Tensor:
        """frames (B, T, 5, 3, H, W) in [0, 1], T a multiple of 4 → latent (B, 80, T/4, H/8, W/8).
        `memory` carries TAEHV MemBlock state across chunks (families branches and shared)."""
        b, t, g, c, h, w = frames.shape
        assert g == G and t % TEMPORAL_SCALE == 0, frames.shape
        memory = memory if memory is not None else StreamMemory()
        x = frames * 2 - 1 if self.input_range == "-1..1" else frames
        if self.family == "grouped":
            z = run_stream(self.encoder, x.reshape(b * t, g * c, h, w), b, memory, "grouped")
        elif self.family == "branches":
            assert self.branch_attr is not None                   # the family registers its branches
            z = torch.cat([run_stream(branch, x[:, :, k].reshape(b * t, c, h, w), b, memory, k)
                           for k, branch in enumerate(getattr(self, self.branch_attr))], dim=1)
        else:                                                     # shared: the 5 channels as 5 streams
            z = run_stream(self.encoder, x.transpose(1, 2).reshape(b * g * t, c, h, w), b * g, memory, "shared")
            z = z.reshape(b, g, t // TEMPORAL_SCALE, *z.shape[1:]).transpose(1, 2)   # (B, t, 5, C, h, w)
            z = self.fusion(z.reshape(b * (t // TEMPORAL_SCALE), -1, *z.shape[-2:]))
        return z.reshape(b, t // TEMPORAL_SCALE, *z.shape[1:]).transpose(1, 2)


def _grouped(shapes: Shapes) -> GBufferEncoder | None:
    if any(not k.startswith("encoder.") for k in shapes):
        return None
    blocks = sequential_from_shapes(shapes, "encoder.", groups=G)
    return GBufferEncoder("grouped", {"encoder": blocks}) if fits(blocks, G * 3, G * LATENT_CHANNELS) else None


def _branches(shapes: Shapes) -> GBufferEncoder | None:
    attr = next((a for a in ("branches", "encoders") if all(k.startswith(a + ".") for k in shapes)), None)
    if attr is None:
        return None
    branches = [b for b in (sequential_from_shapes(shapes, f"{attr}.{k}.") for k in range(G))
                if fits(b, 3, LATENT_CHANNELS)]
    if len(branches) < G:                 # one that does not fit: not this family
        return None
    return GBufferEncoder("branches", {attr: nn.ModuleList(branches)})


def _shared(shapes: Shapes) -> GBufferEncoder | None:
    fusion = shapes.get("fusion.weight")
    if fusion is None or len(fusion) != 4 or any(not k.startswith(("encoder.", "fusion.")) for k in shapes):
        return None
    blocks = sequential_from_shapes(shapes, "encoder.")
    out = blocks[-1].out_channels if blocks and isinstance(blocks[-1], nn.Conv2d) else 0
    if not out or not fits(blocks, 3, out) or tuple(fusion) != (G * LATENT_CHANNELS, G * out, 1, 1):
        return None
    mix = nn.Conv2d(G * out, G * LATENT_CHANNELS, 1, bias="fusion.bias" in shapes)
    return GBufferEncoder("shared", {"encoder": blocks, "fusion": mix})


ENCODER_FAMILIES = (
    Family("grouped", "encoder.N.* (grouped convs, groups=5)", _grouped),
    Family("branches", "branches.K.N.* or encoders.K.N.* (K = 0..4, TAEHV encoders)", _branches),
    Family("shared", "encoder.N.* + fusion.weight (one TAEHV encoder + 1x1 fusion)", _shared),
)
