"""RGB frames → the RGB latents the transformer learns to produce.

- From-scratch models: the encoder of our own codec (`train codec`), whose decoder the model ships with.
- Fine-tunes of official weights: their codecs stay; targets come from the Wan 2.1 VAE of a local directory
  (diffusers layout, `vae/` sub-folder or the VAE folder itself). Wan's VAE is causal in time with a lone first
  frame (T frames → 1 + (T-1)/4 latents), while Flash aligns latent j with frames 4j..4j+3: each 4-frame group
  is therefore encoded behind the previous group's last frame (the lone-frame slot) and its second latent kept.
  Raw (unnormalised) latents, the scale the TAEW2.1 decoder reads.
All targets are computed without gradients. Our codec's are computed once per recording and style
(`CodecTargets.recording`, `LatentCache`): the frozen encoder sees each recording once, in order, carrying its
TAEHV memory across blocks as a stream does, and a clip's targets are a slice. On a CPU that saves the encoder's
forward pass in every step (269 of 698 ms of a nano step, bench/train_step_bench.py). Clips then start on a
latent boundary (every 4th frame). The Wan VAE encodes per batch.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Sequence

import torch

from renderer.flash.config import TEMPORAL_SCALE
from renderer.flash.taehv import StreamMemory
from training.errors import TrainingError
from training.styles import per_clip

Targets = Callable[[torch.Tensor], torch.Tensor]    # (B, T, 3, H, W) in [0, 1] → (B, 16, T/4, h, w)
RECORDING_BLOCK = 64                                # frames encoded at a time (a multiple of 4: bounds memory)


class CodecTargets:
    """Our codec's RGB encoder (frozen): per batch, or a whole recording streamed through it once."""

    def __init__(self, encoder: torch.nn.Module):
        self.encoder = encoder.eval().requires_grad_(False)

    @torch.no_grad()
    def __call__(self, frames: torch.Tensor) -> torch.Tensor:
        return self.encoder(frames)

    @torch.no_grad()
    def recording(self, rgb: torch.Tensor, device: str = "cpu", block: int = RECORDING_BLOCK) -> torch.Tensor:
        """uint8 (N, 3, H, W) → (16, N/4, h, w), the frames in order with the encoder's memory carried over;
        the last N mod 4 frames (no whole latent) are dropped."""
        usable = rgb.shape[0] - rgb.shape[0] % TEMPORAL_SCALE
        memory, parts = StreamMemory(), []
        for start in range(0, usable, block):
            frames = rgb[start:min(start + block, usable)].to(device).float().div_(255)
            parts.append(self.encoder(frames.unsqueeze(0), memory)[0])
        return torch.cat(parts, dim=1)


class LatentCache:
    """Each recording's RGB latents, computed once, per style with `styles` (training/styles.py): `clips` gives a
    batch's targets by (recording, start frame) and style."""

    def __init__(self, targets: CodecTargets, recordings: list, device: str = "cpu", styles=None):
        self.latents: dict[tuple[int, str | None], torch.Tensor] = {}
        for k, r in enumerate(recordings):
            for style in styles.names if styles is not None else (None,):
                rgb = r.rgb if style is None else styles.frames(k, r, style)
                self.latents[k, style] = targets.recording(rgb, device)

    def clips(self, picks: list[tuple[int, int]], frames: int, styles: Sequence[str] | None = None) -> torch.Tensor:
        """(B, 16, frames/4, h, w) for clips starting at frame `start` (a multiple of 4) of recording k."""
        n = frames // TEMPORAL_SCALE
        assert all(start % TEMPORAL_SCALE == 0 for _, start in picks), picks
        return torch.stack([self.latents[k, style][:, start // TEMPORAL_SCALE:start // TEMPORAL_SCALE + n]
                            for (k, start), style in zip(picks, per_clip(styles, len(picks)))])


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
