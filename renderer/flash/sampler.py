"""Few-step flow sampler (rectified flow / mean flow), no classifier-free guidance; every choice is data.

Convention (Wan 2.1, flow matching): x_sigma = (1 - sigma) * x0 + sigma * noise, sigma in [0, 1]; the model
gets timestep = 1000 * sigma and predicts the velocity v = noise - x0.

Settings (FlashConfig / renderer settings): num_steps, shift, sigma_max, update:
  sigmas   num_steps evenly spaced in (0, 1], bent towards high noise by the shift (as Wan/SD3),
           sigma' = shift * sigma / (1 + (shift - 1) * sigma), then scaled so the first is sigma_max (1.0 or the
           0.999 some distilled schedules start from);
  euler    x_next = x + (sigma_next - sigma) * u: exact for a mean-flow model, whose u is the mean velocity over
           the step (also plain Euler for an instantaneous-velocity model);
  renoise  DMD-style: predict x0 = x - sigma * v, then re-noise it to sigma_next with fresh noise.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch

from renderer.flash.config import SamplerUpdate

TIMESTEP_SCALE = 1000.0


@dataclass(frozen=True)
class FewStepSampler:
    num_steps: int = 4
    shift: float = 5.0
    sigma_max: float = 1.0
    update: SamplerUpdate = "euler"

    @classmethod
    def from_config(cls, config) -> "FewStepSampler":
        return cls(config.num_steps, config.timestep_shift, config.sigma_max, config.sampler_update)

    def sigmas(self) -> torch.Tensor:
        """(num_steps + 1,) float32 from sigma_max down to 0."""
        s = torch.linspace(1.0, 0.0, self.num_steps + 1, dtype=torch.float32)
        return self.sigma_max * self.shift * s / (1 + (self.shift - 1) * s)

    def timesteps(self) -> torch.Tensor:
        return self.sigmas()[:-1] * TIMESTEP_SCALE

    @staticmethod
    def add_noise(x0: torch.Tensor, noise: torch.Tensor, sigma: torch.Tensor | float) -> torch.Tensor:
        return (1 - sigma) * x0 + sigma * noise

    @staticmethod
    def velocity_target(x0: torch.Tensor, noise: torch.Tensor) -> torch.Tensor:
        return noise - x0

    def step(self, x: torch.Tensor, velocity: torch.Tensor, sigma: float, sigma_next: float,
             noise: Callable[[], torch.Tensor] | None = None) -> torch.Tensor:
        """One update; `noise()` draws the fresh noise a re-noising step needs (same shape as x)."""
        if self.update == "euler":
            return x + (sigma_next - sigma) * velocity
        x0 = x - sigma * velocity
        if sigma_next <= 0:
            return x0
        return self.add_noise(x0, noise().to(x.device, x.dtype), sigma_next)
