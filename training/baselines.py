"""The baselines a trained renderer must beat, beside albedo passthrough and the reference renderer.

per_pixel   a learned per-pixel map: the 15 G-buffer values of a pixel (5 channels x RGB, in [0, 1]) → its
            target colour, by least squares on their quadratic features (1, v_i, v_i v_j: 136 of them). It sees
            no neighbours and no time, so whatever a model wins beyond it is what context buys. Fitted on
            training recordings only (`alaya-studio eval --fit`), one map per style, never on the test frames.
codec       the model's own RGB codec on the truth (encode, decode): what a model that decodes through this
            codec could reach at best, its ceiling.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from renderer.flash.config import TEMPORAL_SCALE
from renderer.flash.taehv import StreamMemory

GBUFFER_VALUES = 15                                   # 5 channels x RGB per pixel
_UPPER = np.triu_indices(GBUFFER_VALUES)              # the 120 products v_i v_j, i <= j
FEATURES = 1 + GBUFFER_VALUES + len(_UPPER[0])        # 136
RIDGE = 1e-6                                          # relative: keeps the solve defined when a channel is constant
CODEC_BLOCK = 64                                      # frames encoded/decoded at a time (bounds memory)


def pixel_values(gbuffer: np.ndarray) -> np.ndarray:
    """uint8 (..., 5, H, W, 3) frames → float64 (..., H, W, 15) in [0, 1]."""
    g = np.moveaxis(gbuffer, -4, -2)                  # (..., H, W, 5, 3)
    return g.reshape(*g.shape[:-2], GBUFFER_VALUES).astype(np.float64) / 255.0


def quadratic_features(v: np.ndarray) -> np.ndarray:
    """(..., 15) → (..., 136): 1, the values, and their pairwise products (squares included)."""
    products = v[..., _UPPER[0]] * v[..., _UPPER[1]]
    return np.concatenate([np.ones((*v.shape[:-1], 1)), v, products], axis=-1)


@dataclass
class PerPixelMap:
    weights: np.ndarray                               # (136, 3): features → RGB in [0, 1]

    def predict(self, gbuffer: np.ndarray) -> np.ndarray:
        """uint8 (5, H, W, 3) (or (N, 5, H, W, 3)) → uint8 (H, W, 3) (or (N, H, W, 3))."""
        rgb = quadratic_features(pixel_values(gbuffer)) @ self.weights
        return np.clip(np.rint(rgb * 255.0), 0, 255).astype(np.uint8)


@dataclass
class PerPixelFit:
    """Least squares through the normal equations, accumulated sample by sample: X^T X is shared by every
    style (the features are the G-buffer's), X^T Y is kept per style. `pixels` per frame are drawn at random
    (seeded), so a fit over hundreds of frames stays a few hundred MB of arithmetic, not of memory."""

    pixels: int = 2000
    seed: int = 0
    xtx: np.ndarray = field(default_factory=lambda: np.zeros((FEATURES, FEATURES)))
    xty: dict[str, np.ndarray] = field(default_factory=dict)
    samples: int = 0
    _rng: np.random.Generator | None = None

    def add(self, gbuffer: np.ndarray, targets: dict[str, np.ndarray]) -> None:
        """gbuffer uint8 (N, 5, H, W, 3); targets {style: uint8 (N, H, W, 3)} of the same frames."""
        if self._rng is None:
            self._rng = np.random.default_rng(self.seed)
        n, _, h, w, _ = gbuffer.shape
        take = min(self.pixels, h * w)
        picks = np.stack([self._rng.choice(h * w, take, replace=False) for _ in range(n)])   # (N, take)
        x = quadratic_features(np.take_along_axis(pixel_values(gbuffer).reshape(n, h * w, -1),
                                                  picks[..., None], 1).reshape(-1, GBUFFER_VALUES))
        self.xtx += x.T @ x
        self.samples += len(x)
        for style, target in targets.items():
            y = np.take_along_axis(target.reshape(n, h * w, 3), picks[..., None], 1).reshape(-1, 3) / 255.0
            self.xty[style] = self.xty.get(style, np.zeros((FEATURES, 3))) + x.T @ y

    def solve(self) -> dict[str, PerPixelMap]:
        ridge = RIDGE * np.trace(self.xtx) / FEATURES * np.eye(FEATURES)
        return {style: PerPixelMap(np.linalg.solve(self.xtx + ridge, xty)) for style, xty in self.xty.items()}


@torch.no_grad()
def codec_reconstruction(codec, rgb: np.ndarray, device: str = "cpu", gbuffer: torch.Tensor | None = None
                         ) -> np.ndarray:
    """uint8 (N, H, W, 3) truth → uint8 (N - N mod 4, H, W, 3): encoded and decoded as a stream (each block
    carries the encoder's and the decoder's TAEHV memory), frame i of the output aligned with frame i. A guided
    codec's decoder draws each frame with its G-buffer frame (`gbuffer`, uint8 (N, 5, 3, H, W), the recording's)."""
    if codec.guide_width and gbuffer is None:
        raise ValueError("a guided codec decodes with the G-buffer: give the recording's frames")
    usable = len(rgb) - len(rgb) % TEMPORAL_SCALE
    encoder, decoder = codec.encoder_module().to(device).eval(), codec.decoder_module().to(device).eval()
    enc_memory, dec_memory, parts = StreamMemory(), StreamMemory(), []
    for start in range(0, usable, CODEC_BLOCK):
        frames = torch.from_numpy(rgb[start:min(start + CODEC_BLOCK, usable)]).to(device)
        frames = frames.permute(0, 3, 1, 2).float().div_(255).unsqueeze(0)          # (1, T, 3, H, W)
        decoded = decoder(encoder(frames, enc_memory), dec_memory)                   # (1, T, 3, H, W) in [0, 1]
        if decoder.guide is not None:
            assert gbuffer is not None
            g = gbuffer[start:start + decoded.shape[1]].to(device).float().div_(255).unsqueeze(0)
            decoded = decoder.guided(decoded, g)
        decoded = decoded[0]
        parts.append(decoded.mul(255).round_().byte().permute(0, 2, 3, 1).cpu().numpy())
    return np.concatenate(parts) if parts else np.empty((0, *rgb.shape[1:]), np.uint8)
