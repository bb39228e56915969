"""The G-buffer guide: the last stage of a guided decoder, a small convolutional network that draws the frame
from the decoded latent and the full-resolution G-buffer together (small configs trained with
`train codec --guide W`; the official layout and the `full` config have none).

Why: a latent on a grid 8x coarser than the screen cannot carry edges and materials, and a per-pixel map of the
G-buffer cannot know where a shadow falls or what the prompt asked for. Trained end to end with the codec, the
latent is left to carry what the G-buffer lacks (light, shadow, fog, the style), and the G-buffer carries what the
latent cannot (edges, materials). There is no per-pixel lookup and no prompt input here: the look reaches the
picture only through the latent the transformer makes.

    inputs   decoded (N, 3, H, W): the TAEHV decoder's frame; G-buffer (N, 15, H, W) in [0, 1]
             (5 channels x RGB, official order), H and W multiples of 8
    encoder  four scales (1, 1/2, 1/4, 1/8), two 3x3 convolutions each, average pooling between them
    decoder  nearest upsampling, the same scale's encoder features joined (a U-Net), one 3x3 convolution a scale
    output   decoded + conv1x1(...), the last convolution zero-initialised: it starts as the decoder's frame
             (a receptive field of 76 px, by gradient probe: a shadow edge is judged with its caster in view)
    context  optional (`train codec --guide-context`): the coarsest scale's features averaged over the whole
             frame → a small MLP → a per-channel scale and shift of the full-size features before the output
             (zero-initialised: it starts as the plain guide). 76 px is a local guess at what look the latent
             carries; the frame's mean is the look itself, so every pixel is drawn knowing it (the conv baseline
             is told its style; the guide has to read it from the transformer's latent). Keys `guide.ctx.*`
    affine   optional (`train guide` gives it by default): the full-size features also give each pixel 3 x 18
             coefficients, and the output adds each colour's weighted sum of that pixel's 18 values (G-buffer and
             decoded frame). Why: a shader is mostly products, albedo x light; ReLU convolutions of width 16 draw a
             product coarsely, while here the network says how much light falls on the pixel (from the latent's
             light, shadow and look, and the neighbourhood's normals) and the product with the albedo is exact.
             The coefficients vary pixel by pixel and come from the latent: with a zero latent they cannot know
             the look (no prompt reaches the guide). Zero-initialised: it starts as the guide it was. Key
             `guide.coef.*`

Frame by frame, with no memory: a live session guides each frame as the decoder hands it over.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from renderer.flash.refiner import GBUFFER_VALUES, pixel_inputs

SCALES = 4
GUIDE_KEY = "guide.enc.0.0.weight"      # its output channels are the guide's width (`width_from_shapes`)
CONTEXT_KEY = "guide.ctx.0.weight"      # present when the guide has its global context (`context_from_shapes`)
AFFINE_KEY = "guide.coef.weight"        # present when the guide has its per-pixel affine head (`affine_from_shapes`)
PIXEL_VALUES = GBUFFER_VALUES + 3       # what a pixel gives the guide: its G-buffer values and its decoded colour


def widths(width: int) -> list[int]:
    """Channels at each scale: width, 1.5x, 2x, 2x (coarse scales are cheap; the full one is most of the cost)."""
    return [width, width * 3 // 2, width * 2, width * 2]


def _pair(cin: int, cout: int) -> nn.Sequential:
    return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1), nn.ReLU(inplace=True),
                         nn.Conv2d(cout, cout, 3, padding=1), nn.ReLU(inplace=True))


class GBufferGuide(nn.Module):
    def __init__(self, width: int = 16, context: bool = False, affine: bool = False):
        super().__init__()
        w = widths(width)
        self.width, self.context, self.affine = width, context, affine
        self.enc = nn.ModuleList([_pair(PIXEL_VALUES, w[0])]
                                 + [_pair(w[k - 1], w[k]) for k in range(1, SCALES)])
        self.dec = nn.ModuleList([nn.Conv2d(w[k + 1] + w[k], w[k], 3, padding=1) for k in range(SCALES - 1)])
        self.out = nn.Conv2d(w[0], 3, 1, bias=False)     # a residual: the stack's frame carries the level
        nn.init.zeros_(self.out.weight)
        if context:
            last = nn.Linear(w[-1], 2 * w[0])
            nn.init.zeros_(last.weight)
            nn.init.zeros_(last.bias)
            self.ctx = nn.Sequential(nn.Linear(w[-1], w[-1]), nn.ReLU(inplace=True), last)
        if affine:
            self.coef = coef = nn.Conv2d(w[0], 3 * PIXEL_VALUES, 1)
            nn.init.zeros_(coef.weight)
            assert coef.bias is not None
            nn.init.zeros_(coef.bias)

    def forward(self, decoded: torch.Tensor, gbuffer: torch.Tensor) -> torch.Tensor:
        """decoded (N, 3, H, W), G-buffer (N, 5, 3, H, W) or (N, 15, H, W) → (N, 3, H, W), not clamped (training
        needs the gradient outside [0, 1]; `frames` clamps)."""
        values = x = pixel_inputs(decoded, gbuffer.to(decoded.dtype))
        skips = []
        for k, block in enumerate(self.enc):
            x = block(x if k == 0 else F.avg_pool2d(x, 2))
            skips.append(x)
        code = self.ctx(x.mean((2, 3))) if self.context else None
        for k in reversed(range(SCALES - 1)):
            x = F.relu(self.dec[k](torch.cat([F.interpolate(x, scale_factor=2.0, mode="nearest"), skips[k]], 1)))
        if code is not None:
            scale, shift = code.chunk(2, 1)
            x = x * (1 + scale[..., None, None]) + shift[..., None, None]
        out = decoded + self.out(x)
        if self.affine:
            coef = self.coef(x).unflatten(1, (3, PIXEL_VALUES))             # (N, 3, 18, H, W)
            out = out + (coef * values.unsqueeze(1)).sum(2)
        return out

    def frames(self, frames: torch.Tensor, gbuffer: torch.Tensor) -> torch.Tensor:
        """Decoded frames (B, T, 3, H, W), their G-buffer frames (B, >= T, 5, 3, H, W) → (B, T, 3, H, W) in [0, 1]."""
        b, t = frames.shape[:2]
        out = self(frames.flatten(0, 1), gbuffer[:, :t].flatten(0, 1))
        return out.clamp(0, 1).unflatten(0, (b, t))

    def parameter_count(self) -> int:
        return sum(p.numel() for p in self.parameters())


def context_from_shapes(shapes: dict[str, tuple]) -> bool:
    """Whether a decoder file's guide has the global context (`guide.ctx.*`)."""
    return CONTEXT_KEY in shapes


def affine_from_shapes(shapes: dict[str, tuple]) -> bool:
    """Whether a decoder file's guide has the per-pixel affine head (`guide.coef.*`)."""
    return AFFINE_KEY in shapes


def width_from_shapes(shapes: dict[str, tuple]) -> int:
    """The guide's width from a decoder file's `guide.*` shapes; 0 where the file has none."""
    shape = shapes.get(GUIDE_KEY)
    return int(shape[0]) if shape else 0
