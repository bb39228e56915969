"""The G-buffer refiner: a small full-resolution stage after the tiny decoder, for small configs
(`FlashConfig.refiner_styles` > 0; the official layout and the `full` config have none).

Fine structure need not survive the 8x latent: per pixel the refiner sees the decoded colour beside the 15
G-buffer values the frame was drawn from, and adds back what the latent could not carry.

    inputs   decoded (N, 3, H, W) in [0, 1]; G-buffer (N, 15, H, W) in [0, 1] (5 channels x RGB, official order);
             prompt (N, text_dim): the rows of the prompt's embedding summed (linear, so a blend stays a blend)
    route    w = softmax(sharpness * cos(prompt, key_s)) over S looks (N, S): the looks the model was trained on
    head     per pixel, the quadratic features phi of its 18 values v = [G-buffer, decoded] (1, v_i, v_i v_j: 190)
             mapped by sum_s w_s W_s (each W_s (190, 3)): per look a quadratic map, the per-pixel baseline's form
             (training/baselines.py) with the decoded colour among its inputs (shadows, fog: what the G-buffer lacks)
    context  conv3x3(18 → c) ReLU, FiLM by the prompt (1 + scale, shift), conv3x3(c → c) ReLU, conv1x1(c → 3);
             the last conv zero-initialised: a residual from each pixel's 5x5 neighbourhood (edges, glow, seams)
    output   clamp(head + context, 0, 1)

Trained after the transformer (training/refiner_fit.py): W_s by least squares on the trained model's own decoded
frames, then the context branch by gradient descent on the same frames.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

GBUFFER_VALUES = 15                              # 5 channels x RGB
PIXEL_VALUES = GBUFFER_VALUES + 3                # + the decoded colour
FEATURES = 1 + PIXEL_VALUES + PIXEL_VALUES * (PIXEL_VALUES + 1) // 2     # 190
DEFAULT_SHARPNESS = 25.0


def pixels(x: torch.Tensor) -> torch.Tensor:
    """(N, C, H, W) → (N, H, W, C): a view where x is channels-last."""
    return x.permute(0, 2, 3, 1)


def pixel_inputs(decoded: torch.Tensor, gbuffer: torch.Tensor) -> torch.Tensor:
    """decoded (N, 3, H, W), G-buffer (N, 5, 3, H, W) or (N, 15, H, W) → (N, 18, H, W), channels-last: each
    pixel's 18 values side by side, as the head's matrix product and the convolutions read them."""
    gbuffer = gbuffer.flatten(1, -3) if gbuffer.ndim == 5 else gbuffer
    return torch.cat([pixels(gbuffer), pixels(decoded)], dim=-1).permute(0, 3, 1, 2)


def quadratic_features(v: torch.Tensor, dim: int = 1) -> torch.Tensor:
    """(..., 18, ...) along `dim` → (..., 190, ...): 1, the values, their pairwise products (squares included)."""
    i, j = torch.triu_indices(v.shape[dim], v.shape[dim], device=v.device)
    one = torch.ones_like(v.narrow(dim, 0, 1))
    return torch.cat([one, v, v.index_select(dim, i) * v.index_select(dim, j)], dim=dim)


def pooled_prompt(prompt: torch.Tensor) -> torch.Tensor:
    """(N, L, D) padded embedding (zero rows after the prompt's own) or (N, D) → (N, D)."""
    return prompt.sum(1) if prompt.ndim == 3 else prompt


class GBufferRefiner(nn.Module):
    def __init__(self, looks: int, text_dim: int, hidden: int = 16):
        super().__init__()
        self.keys = nn.Parameter(torch.zeros(looks, text_dim))           # each look's prompt direction
        self.sharpness = nn.Parameter(torch.tensor(DEFAULT_SHARPNESS))
        self.head = nn.Parameter(torch.zeros(looks, FEATURES, 3))
        with torch.no_grad():                                            # start as "decoded colour, unchanged"
            self.head[:, 1 + GBUFFER_VALUES:1 + PIXEL_VALUES] = torch.eye(3)
        self.context_in = nn.Conv2d(PIXEL_VALUES, hidden, 3, padding=1)
        self.film = nn.Linear(text_dim, 2 * hidden)
        self.context_mid = nn.Conv2d(hidden, hidden, 3, padding=1)
        self.context_out = nn.Conv2d(hidden, 3, 1)
        for layer in (self.film, self.context_out):
            nn.init.zeros_(layer.weight)
            if layer.bias is not None:        # always: both are built with a bias
                nn.init.zeros_(layer.bias)

    @property
    def looks(self) -> int:
        return self.head.shape[0]

    def routing(self, prompt: torch.Tensor) -> torch.Tensor:
        """(N, D) or (N, L, D) → (N, S) look weights."""
        e = pooled_prompt(prompt).to(self.keys.dtype)
        cos = F.normalize(e, dim=-1) @ F.normalize(self.keys, dim=-1).T
        return torch.softmax(self.sharpness * cos, dim=-1)

    def head_map(self, v: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
        """v (N, 18, H, W), look weights (N, S) → (N, 3, H, W): the quadratic map phi(v) @ W, evaluated per pixel
        as c + sum_i v_i (l_i + sum_j Q_ij v_j) with Q upper-triangular: one matrix product for the inner sums and
        one batched dot product, so the 190 features are never made (writing N x 190 x H x W floats took half of
        a live 4-frame chunk's time)."""
        return self._head_pixels(pixels(v), weights).permute(0, 3, 1, 2)

    def _head_pixels(self, v: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
        """v (N, H, W, 18) → (N, H, W, 3)."""
        maps = torch.einsum("ns,sfc->nfc", weights, self.head).to(v.dtype)          # (N, 190, 3)
        n, p = v.shape[0], v.shape[-1]
        const, linear, pairs = maps[:, 0], maps[:, 1:1 + p], maps[:, 1 + p:]
        i, j = torch.triu_indices(p, p, device=v.device)                            # quadratic_features' order
        quad = v.new_zeros(n, p, p, 3)
        quad[:, i, j] = pairs
        rows = v.flatten(1, 2)                                                      # (N, HW, 18)
        inner = torch.baddbmm(linear.transpose(1, 2).flatten(1).unsqueeze(1), rows,
                              quad.permute(0, 2, 3, 1).flatten(2))                  # (N, HW, 3 x 18)
        out = torch.bmm(inner.flatten(0, 1).unflatten(-1, (3, p)), rows.flatten(0, 1).unsqueeze(-1))
        return out.view(*v.shape[:3], 3) + const[:, None, None]                    # (N, H, W, 3)

    def _context_pixels(self, v: torch.Tensor, prompt: torch.Tensor) -> torch.Tensor:
        """v (N, 18, H, W) → (N, H, W, 3); the 1x1 output convolution as the matrix product it is."""
        scale, shift = self.film(pooled_prompt(prompt).to(v.dtype)).chunk(2, dim=-1)
        h = F.relu(self.context_in(v))
        h = torch.addcmul(shift[..., None, None], h, 1 + scale[..., None, None])
        h = F.relu(self.context_mid(h))
        return F.linear(pixels(h), self.context_out.weight.flatten(1), self.context_out.bias)

    def forward(self, decoded: torch.Tensor, gbuffer: torch.Tensor, prompt: torch.Tensor) -> torch.Tensor:
        """decoded (N, 3, H, W), G-buffer (N, 5, 3, H, W) or (N, 15, H, W), prompt (N, [L,] D) → (N, 3, H, W),
        channels-last (each pixel's colour side by side, as a frame leaves)."""
        v = pixel_inputs(decoded, gbuffer.to(decoded.dtype))
        out = self._head_pixels(pixels(v), self.routing(prompt)) + self._context_pixels(v, prompt)
        return out.clamp(0, 1).permute(0, 3, 1, 2)

    def refine_frames(self, frames: torch.Tensor, gbuffer: torch.Tensor, prompt: torch.Tensor) -> torch.Tensor:
        """Decoded frames (B, T, 3, H, W), their G-buffer frames (B, T, 5, 3, H, W), prompt (B, L, D)
        → (B, T, 3, H, W)."""
        b, t = frames.shape[:2]
        per_frame = prompt.unsqueeze(1).expand(b, t, *prompt.shape[1:]).flatten(0, 1)
        out = self(frames.flatten(0, 1), gbuffer[:, :t].flatten(0, 1), per_frame)
        return out.unflatten(0, (b, t))

    def parameter_count(self) -> int:
        return sum(p.numel() for p in self.parameters())
