"""The decoder-alignment probe: which latent ↔ frame alignment do real weights follow?

One window is rendered once and decoded without trimming (raw frames r = 0..T-1). Under our alignment raw frame
i shows G-buffer frame i (offset 0); under TAEHV's (latent j covers frames 4j-3..4j, 3 start-up frames dropped)
raw frame i + 3 shows G-buffer frame i (offset 3). Geometry edges do not depend on the style, so the offset at
which the rendered edges overlap the G-buffer edges best is the alignment the weights were trained with.

    score(offset) = mean over frames i of IoU(edges(rgb[i + offset]), edges(gbuffer[i]))
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from alaya_errors import UserError
from renderer.flash.config import PATCH_MULTIPLE, TEMPORAL_SCALE
from renderer.flash.decoder import STARTUP_FRAMES, DecoderStream
from renderer.flash.history import LatentHistory

OFFSETS = tuple(range(STARTUP_FRAMES + 1))
EDGE_QUANTILE = 0.9          # the strongest 10% of gradients count as edges
GEOMETRY_CHANNELS = (1, 3)   # depth and normal: where geometry edges are


def edges(images: torch.Tensor) -> torch.Tensor:
    """(T, C, H, W) in [0, 1] → bool (T, H, W): Sobel magnitude of the channel mean above its 90th percentile."""
    gray = images.float().mean(dim=1, keepdim=True)
    kx = torch.tensor([[-1.0, 0, 1], [-2, 0, 2], [-1, 0, 1]]).view(1, 1, 3, 3)
    gx, gy = F.conv2d(gray, kx, padding=1), F.conv2d(gray, kx.transpose(2, 3), padding=1)
    mag = (gx.square() + gy.square()).sqrt()[:, 0, 1:-1, 1:-1]                     # borders are not edges
    threshold = mag.flatten(1).quantile(EDGE_QUANTILE, dim=1).view(-1, 1, 1)
    return (mag > threshold) & (mag > 1e-6)


def edge_overlap(rgb: torch.Tensor, gbuffer: torch.Tensor, offsets=OFFSETS) -> dict[int, float]:
    """rgb (T, 3, H, W), gbuffer (T, 5, 3, H, W), both in [0, 1] → {offset: mean IoU} (module docstring)."""
    g = edges(gbuffer[:, list(GEOMETRY_CHANNELS)].flatten(1, 2))
    r = edges(rgb)
    scores = {}
    for o in offsets:
        n = min(len(g), len(r) - o)
        inter = (r[o:o + n] & g[:n]).flatten(1).sum(1).float()
        union = (r[o:o + n] | g[:n]).flatten(1).sum(1).float().clamp(min=1)
        scores[o] = round(float((inter / union).mean()), 4)
    return scores


def load_window(path: Path) -> np.ndarray:
    """window-NN.npy: uint8 (T, 5, H, W, 3), T a multiple of 4, sides of at least 16 pixels."""
    try:
        window = np.load(path, allow_pickle=False)
    except (OSError, ValueError) as exc:
        raise UserError(f"not a readable .npy file ({exc})", str(path)) from None
    t = window.shape[0] if window.ndim else 0
    if window.dtype != np.uint8 or window.ndim != 5 or window.shape[1] != 5 or window.shape[4] != 3 \
            or t < TEMPORAL_SCALE or t % TEMPORAL_SCALE or min(window.shape[2:4]) < PATCH_MULTIPLE:
        raise UserError(f"expected a uint8 (T, 5, H, W, 3) window with T a multiple of 4, got "
                        f"{window.dtype} {window.shape}", str(path))
    return window


@torch.inference_mode()
def probe_alignment(pipeline, window: np.ndarray, prompt: str | None = None, seed: int = 0) -> dict:
    """Render `window` once (its size cut to multiples of 16) and score every offset."""
    t, _, h, w, _ = window.shape
    h, w = h - h % PATCH_MULTIPLE, w - w % PATCH_MULTIPLE
    frames = torch.from_numpy(window[:, :, :h, :w]).permute(0, 1, 4, 2, 3).float().div(255)  # (T, 5, 3, H, W)
    prompt = prompt or next(iter(pipeline.prompts.cached), None)
    if prompt is None:
        raise UserError("the weights directory has no cached prompt embedding; pass --prompt", "--probe")
    embedding = pipeline.prompts.prompt(prompt).unsqueeze(0).to(pipeline.device)
    cfg = pipeline.config
    latent_gbuffer = pipeline.encode_gbuffer(frames.unsqueeze(0))
    history = LatentHistory(cfg.history_sizes, cfg.in_channels, h // 8, w // 8, pipeline.device, pipeline.dtype)
    n = latent_gbuffer.shape[2]
    gen = torch.Generator().manual_seed(seed)
    noise = torch.randn(1, 16, n, h // 8, w // 8, generator=gen)
    latent = pipeline.denoise(noise, latent_gbuffer, embedding, history.inputs(n),
                              fresh_noise=lambda: torch.randn(noise.shape, generator=gen))
    rgb = pipeline.decode(latent, DecoderStream(trim_startup_frames=False))[0].cpu()
    scores = edge_overlap(rgb, frames)
    ours, taehv = scores[0], scores[STARTUP_FRAMES]
    return {"prompt": prompt, "frames": t, "size": [w, h], "edge_overlap_by_offset": scores,
            "ours_offset_0": ours, "taehv_offset_3": taehv,
            "better": "trim_startup_frames=false" if ours >= taehv else "trim_startup_frames=true"}
