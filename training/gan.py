"""The light GAN term of the report's last stage: a patch discriminator on decoded frames, hinge losses.

After step reduction a few-step model blurs texture; the report adds a small adversarial loss to recover it.
Here (`train --gan-weight W`, 0 = off): the last trained chunk's predicted landing latent (flow: its x0 estimate;
mean flow: its jump) is decoded by the frozen tiny decoder, and a small convolutional discriminator scores
38-pixel patches of it against the decoded truth at the same point:

    discriminator  max  E[min(0, -1 + D(real))] + E[min(0, -1 - D(fake))]     (hinge; own Adam, lr `lr`)
    generator      W * -E[D(fake)]                                          added to the objective's loss

The discriminator's parameters are frozen while the generator's loss is computed, so the trainee's backward
never writes into them; it then steps on the detached frames of that same pass.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from renderer.flash.decoder import DecoderStream


class PatchDiscriminator(nn.Module):
    """(N, 3, H, W) in [0, 1] → (N, 1, H/8, W/8) logits, one per patch (PatchGAN, spectral-normalised)."""

    def __init__(self, width: int = 32):
        super().__init__()
        sn = nn.utils.parametrizations.spectral_norm
        self.layers = nn.Sequential(
            sn(nn.Conv2d(3, width, 4, 2, 1)), nn.LeakyReLU(0.2),
            sn(nn.Conv2d(width, 2 * width, 4, 2, 1)), nn.LeakyReLU(0.2),
            sn(nn.Conv2d(2 * width, 4 * width, 4, 2, 1)), nn.LeakyReLU(0.2),
            sn(nn.Conv2d(4 * width, 1, 3, 1, 1)))

    def forward(self, frames: torch.Tensor) -> torch.Tensor:
        return self.layers(frames * 2 - 1)


def hinge_discriminator_loss(real: torch.Tensor, fake: torch.Tensor) -> torch.Tensor:
    return F.relu(1 - real).mean() + F.relu(1 + fake).mean()


def hinge_generator_loss(fake: torch.Tensor) -> torch.Tensor:
    return -fake.mean()


class GanTerm:
    """Decoder (frozen, gradients pass through to the latent), discriminator and its optimiser."""

    def __init__(self, decoder: nn.Module, weight: float, lr: float = 2e-4, device: str = "cpu", seed: int = 0):
        self.weight = weight
        self.decoder = decoder.to(device).requires_grad_(False).eval()
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            self.discriminator = PatchDiscriminator().to(device)
        self.optimizer = torch.optim.Adam(self.discriminator.parameters(), lr=lr, betas=(0.5, 0.999))
        self.pending: tuple[torch.Tensor, torch.Tensor] | None = None

    def decode(self, latent: torch.Tensor) -> torch.Tensor:
        """(B, 16, t, h, w) → (B * 4t, 3, 8h, 8w): one chunk from a fresh decoder memory."""
        frames = self.decoder(latent, DecoderStream())
        return frames.flatten(0, 1)

    def generator_loss(self, fake_latent: torch.Tensor, real_latent: torch.Tensor) -> torch.Tensor:
        """W * the generator's hinge loss on the decoded prediction; keeps both frame sets for `discriminator_step`."""
        fake = self.decode(fake_latent.float())
        with torch.no_grad():
            real = self.decode(real_latent.float())
        self.discriminator.requires_grad_(False)
        loss = hinge_generator_loss(self.discriminator(fake))
        self.discriminator.requires_grad_(True)
        self.pending = (real, fake.detach())
        return self.weight * loss

    def discriminator_step(self) -> float:
        """One update on the frames of the last generator pass; returns the discriminator's loss before it."""
        if self.pending is None:
            raise RuntimeError("discriminator_step needs a generator_loss first (it trains on that pass's frames)")
        real, fake = self.pending
        self.pending = None
        loss = hinge_discriminator_loss(self.discriminator(real), self.discriminator(fake))
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        self.optimizer.step()
        return loss.item()

    def state_dict(self) -> dict:
        return {"discriminator": self.discriminator.state_dict(), "optimizer": self.optimizer.state_dict()}

    def load_state_dict(self, state: dict) -> None:
        self.discriminator.load_state_dict(state["discriminator"])
        self.optimizer.load_state_dict(state["optimizer"])
