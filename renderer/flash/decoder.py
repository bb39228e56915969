"""The stateful streaming tiny decoder: TAEHV architecture (madebyollin/taehv), TAEW2.1 sizes.

Module structure and indices match TAEHV's `decoder` nn.Sequential, so `taew2_1_ft.safetensors`
(`decoder.1.weight`, `decoder.3.conv.0.weight`, `decoder.7.conv.weight`, ...) loads by name:

  0 Clamp  1 conv  2 ReLU | 3-5 MemBlock  6 Upsample  7 TGrow(1)  8 conv | 9-11 MemBlock  12 Upsample
  13 TGrow(2)  14 conv | 15-17 MemBlock  18 Upsample  19 TGrow(2)  20 conv | 21 ReLU  22 conv

Widths (n_f) are read from a checkpoint's shapes (`decoder_channels`): decoder.1 / 8 / 14 / 20 output channels.

Streaming: across chunks each MemBlock keeps its last input (taehv.StreamMemory), so decoding chunk by chunk gives
exactly what decoding the whole stream gives. Alignment (`DecoderStream(trim_startup_frames=...)`):
  - False (ours so far): latent j decodes to frames 4j..4j+3, nothing dropped;
  - True (TAEHV's `decode_video`): latent j covers frames 4j-3..4j, the first 3 decoded frames of a rollout are
    start-up frames and are dropped once.
"""

from __future__ import annotations

from typing import Iterator

import torch
from torch import nn

from renderer.flash.config import LATENT_CHANNELS, TEMPORAL_SCALE
from renderer.flash.guide import GBufferGuide
from renderer.flash.taehv import Clamp, MemBlock, StreamMemory, TGrow, conv, init_signal_preserving, run_stream

STARTUP_FRAMES = TEMPORAL_SCALE - 1           # TAEHV's frames_to_trim for 4x temporal upscaling
WIDTH_LAYERS = (1, 8, 14, 20)                 # decoder.N convs whose output channels are n_f[0..3]


def taehv_decoder(n_f=(256, 128, 64, 64), latent_channels: int = LATENT_CHANNELS) -> nn.Sequential:
    return nn.Sequential(
        Clamp(), conv(latent_channels, n_f[0]), nn.ReLU(inplace=True),
        MemBlock(n_f[0], n_f[0]), MemBlock(n_f[0], n_f[0]), MemBlock(n_f[0], n_f[0]),
        nn.Upsample(scale_factor=2), TGrow(n_f[0], 1), conv(n_f[0], n_f[1], bias=False),
        MemBlock(n_f[1], n_f[1]), MemBlock(n_f[1], n_f[1]), MemBlock(n_f[1], n_f[1]),
        nn.Upsample(scale_factor=2), TGrow(n_f[1], 2), conv(n_f[1], n_f[2], bias=False),
        MemBlock(n_f[2], n_f[2]), MemBlock(n_f[2], n_f[2]), MemBlock(n_f[2], n_f[2]),
        nn.Upsample(scale_factor=2), TGrow(n_f[2], 2), conv(n_f[2], n_f[3], bias=False),
        nn.ReLU(inplace=True), conv(n_f[3], 3),
    )


def decoder_channels(shapes: dict[str, tuple], default: tuple[int, int, int, int]) -> tuple[int, int, int, int]:
    """n_f from a checkpoint's `decoder.N.weight` shapes; `default` where the file lacks them."""
    found = [shapes.get(f"decoder.{i}.weight", (None,))[0] for i in WIDTH_LAYERS]
    n_f = [default[k] if n is None else n for k, n in enumerate(found)]      # one per WIDTH_LAYERS entry
    return n_f[0], n_f[1], n_f[2], n_f[3]


class DecoderStream(StreamMemory):
    """A rollout's decoder state: MemBlock memory plus the start-up frames still to drop."""

    def __init__(self, trim_startup_frames: bool = False):
        super().__init__()
        self.to_trim = STARTUP_FRAMES if trim_startup_frames else 0


class TinyDecoder(nn.Module):
    """State-dict names `decoder.N...` as in TAEHV. Stateless itself: the caller owns a DecoderStream.

    A guided decoder (`guide_width` > 0, ours: `train codec --guide`) ends in a G-buffer guide (guide.py, keys
    `guide.*` in the same file): `forward` and `frames` still give the TAEHV stack's frames, and `guided` draws
    the picture from each of them and its G-buffer frame."""

    def __init__(self, channels=(256, 128, 64, 64), guide_width: int = 0, guide_context: bool = False,
                 guide_affine: bool = False):
        super().__init__()
        self.decoder = taehv_decoder(channels)
        init_signal_preserving(self)
        self.guide = GBufferGuide(guide_width, guide_context, guide_affine) if guide_width else None

    def guided(self, frames: torch.Tensor, gbuffer: torch.Tensor) -> torch.Tensor:
        """frames (B, T, 3, H, W) from `forward`/`frames`, their G-buffer frames (B, >= T, 5, 3, H, W) in [0, 1]
        → the guided decoder's frames (B, T, 3, H, W) in [0, 1]; frame by frame independent."""
        if self.guide is None:
            raise ValueError("this decoder has no G-buffer guide")
        return self.guide.frames(frames, gbuffer.to(frames.dtype))

    def forward(self, latents: torch.Tensor, stream: StreamMemory) -> torch.Tensor:
        """latents (B, 16, t, h, w) → frames (B, 4t - trimmed, 3, 8h, 8w) in [0, 1]; updates `stream`."""
        b, c, t, h, w = latents.shape
        x = run_stream(self.decoder, latents.transpose(1, 2).reshape(b * t, c, h, w), b, stream)
        x = x.clamp(0, 1).reshape(b, -1, *x.shape[1:])
        if isinstance(stream, DecoderStream):       # a plain StreamMemory trims nothing
            trim = min(stream.to_trim, x.shape[1])
            if trim:
                stream.to_trim -= trim
                x = x[:, trim:]
        return x

    def frames(self, latent: torch.Tensor, stream: StreamMemory) -> Iterator[torch.Tensor]:
        """One latent frame (B, 16, 1, h, w) → its frames (B, 1, 3, 8h, 8w) in [0, 1], one at a time, each as
        soon as it is decoded; what `forward` gives for the latent, in order, up to float rounding, and `stream`
        after the last frame as after `forward` (a caller that stops early leaves it part way).

        Depth first: after each TGrow the frames it grew go on through the rest of the decoder one by one, so the
        first frame leaves having run half of the last MemBlock stage and a quarter of the full-size layers. That
        is exact: a MemBlock reads its input one frame back, which the earlier frame (or `stream`) already holds.
        An Upsample before a TGrow runs after it instead: nearest upsampling commutes with TGrow's 1x1 convolution,
        which then runs on a quarter of the pixels."""
        b, c, t, h, w = latent.shape
        if t != 1:
            raise ValueError(f"frames() decodes one latent frame at a time, got {t}")
        for frame in self._depth_first(latent.reshape(b, c, h, w), 0, stream):
            if isinstance(stream, DecoderStream) and stream.to_trim:    # a plain StreamMemory trims nothing
                stream.to_trim -= 1
                continue
            yield frame.clamp(0, 1).unsqueeze(1)

    def _depth_first(self, x: torch.Tensor, start: int, stream: StreamMemory) -> Iterator[torch.Tensor]:
        """x (B, C, H, W), one frame of each of B streams, from layer `start` on."""
        layers = self.decoder
        i = start
        while i < len(layers):
            block = layers[i]
            upsample = isinstance(block, nn.Upsample) and i + 1 < len(layers) and isinstance(layers[i + 1], TGrow)
            if upsample or isinstance(block, TGrow):
                grow = layers[i + 1] if upsample else block
                assert isinstance(grow, TGrow)                          # by the test just above
                grown = grow.conv(x)                                     # (B, stride * C, H, W): frame k's C
                for k in range(grow.stride):
                    frame = grown[:, k * x.shape[1]:(k + 1) * x.shape[1]]
                    frame = block(frame) if upsample else frame
                    yield from self._depth_first(frame, i + (2 if upsample else 1), stream)
                return
            x = block(x, stream.shifted(("", i), x, x.shape[0])) if isinstance(block, MemBlock) else block(x)
            i += 1
        yield x


def fit_tgrow_weights(state: dict, decoder: nn.Sequential, prefix: str = "decoder.") -> dict:
    """TAEHV checkpoints may hold a wider TGrow than the decoder uses (e.g. stride 2 where we grow by 1); as
    TAEHV does, keep the last-timestep output channels. Other shape mismatches are left for the loader."""
    for i, block in enumerate(decoder):
        key = f"{prefix}{i}.conv.weight"
        if isinstance(block, TGrow) and key in state:
            want = block.conv.weight.shape[0]
            if state[key].shape[0] > want and state[key].shape[0] % want == 0:
                state = {**state, key: state[key][-want:]}
    return state
