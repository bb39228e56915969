"""RGB frames → the RGB latents the transformer learns to produce.

- From-scratch models: the encoder of our own codec (`train codec`), whose decoder the model ships with.
- Fine-tunes of official weights: their codecs stay; targets come from the Wan 2.1 VAE of a local directory
  (diffusers layout, `vae/` sub-folder or the VAE folder itself). Wan's VAE is causal in time with a lone first
  frame (T frames → 1 + (T-1)/4 latents), while Flash aligns latent j with frames 4j..4j+3: each 4-frame group
  is therefore encoded behind the previous group's last frame (the lone-frame slot) and its second latent kept.
  Raw (unnormalised) latents, the scale the TAEW2.1 decoder reads.
All targets are computed once per batch without gradients.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

import torch

from renderer.flash.config import TEMPORAL_SCALE
from training.errors import TrainingError

Targets = Callable[[torch.Tensor], torch.Tensor]    # (B, T, 3, H, W) in [0, 1] → (B, 16, T/4, h, w)


def codec_targets(encoder: torch.nn.Module) -> Targets:
    encoder = encoder.eval().requires_grad_(False)

    @torch.no_grad()
    def encode(frames: torch.Tensor) -> torch.Tensor:
        return encoder(frames)
    return encode


def wan_vae_targets(vae_dir: str | Path, device: str = "cpu") -> Targets:
    from diffusers import AutoencoderKLWan

    root = Path(vae_dir)
    folder = root / "vae" if (root / "vae").is_dir() else root
    if not (folder / "config.json").is_file():
        raise TrainingError("no Wan VAE here (expected config.json, or a vae/ folder holding one)", str(root))
    try:
        vae = AutoencoderKLWan.from_pretrained(folder).to(device).eval().requires_grad_(False)
    except (OSError, ValueError, RuntimeError) as exc:
        raise TrainingError(f"cannot load the Wan VAE: {str(exc).splitlines()[0][:160]}", str(folder)) from None

    @torch.no_grad()
    def encode(frames: torch.Tensor) -> torch.Tensor:
        b, t = frames.shape[:2]
        x = frames.to(device, vae.dtype).permute(0, 2, 1, 3, 4) * 2 - 1           # (B, 3, T, H, W) in [-1, 1]
        latents = []
        for j in range(t // TEMPORAL_SCALE):
            lead = x[:, :, max(4 * j - 1, 0):4 * j] if j else x[:, :, :1]          # the previous group's last frame
            group = torch.cat([lead, x[:, :, 4 * j:4 * j + 4]], dim=2)              # 5 frames → 2 latents
            latents.append(vae.encode(group).latent_dist.mode()[:, :, 1:2])
        return torch.cat(latents, dim=2).float()
    return encode
