"""Few-step flow sampler (rectified flow / mean flow), no classifier-free guidance; every choice is data.

Convention (Wan 2.1, flow matching): x_sigma = (1 - sigma) * x0 + sigma * noise, sigma in [0, 1]; the model
gets timestep = 1000 * sigma and predicts the velocity v = noise - x0.

A mean-flow model (config `interval_embedding`) predicts instead the average velocity u(z, r, t) over [r, t] and
gets timestep = 1000 * (t, t - r) (`timestep_input`); the few steps are then jumps z_r = z_t - (t - r) u.

Settings (FlashConfig / renderer settings): num_steps, shift, sigma_max, update, mean_flow:
  sigmas   num_steps evenly spaced in (0, 1], bent towards high noise by the shift (as Wan/SD3),
           sigma' = shift * sigma / (1 + (shift - 1) * sigma), then scaled so the first is sigma_max (1.0 or the
           0.999 some distilled schedules start from);
  euler    x_next = x + (sigma_next - sigma) * v: plain Euler for a velocity model; for a mean-flow model the
           average-velocity jump from sigma to sigma_next (its u is asked for r = sigma_next: `jump_end`);
  renoise  DMD-style: predict x0 = x - sigma * v, then re-noise it to sigma_next with fresh noise (a mean-flow
           model is asked for its jump to r = 0).
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
    mean_flow: bool = False

    @classmethod
    def from_config(cls, config) -> "FewStepSampler":
        return cls(config.num_steps, config.timestep_shift, config.sigma_max, config.sampler_update,
                   config.interval_embedding)

    def jump_end(self, i: int) -> float | None:
        """r of step i's u(z, r, t) for a mean-flow model (None for a velocity model): where the update lands."""
        if not self.mean_flow:
            return None
        return float(self.sigmas()[i + 1]) if self.update == "euler" else 0.0

    def sigmas(self) -> torch.Tensor:
        """(num_steps + 1,) float32 from sigma_max down to 0."""
        s = torch.linspace(1.0, 0.0, self.num_steps + 1, dtype=torch.float32)
        return self.sigma_max * self.shift * s / (1 + (self.shift - 1) * s)

    def timesteps(self) -> torch.Tensor:
        return self.sigmas()[:-1] * TIMESTEP_SCALE

    @staticmethod
    def timestep_input(t: torch.Tensor, r: torch.Tensor | None) -> torch.Tensor:
        """The transformer's timestep: (B,) = 1000 t for a velocity model, (B, 2) = 1000 (t, t - r) for mean flow."""
        at_least_fp32 = torch.promote_types(t.dtype, torch.float32)
        if r is None:
            return (t * TIMESTEP_SCALE).to(at_least_fp32)
        return (torch.stack([t, t - r], dim=-1) * TIMESTEP_SCALE).to(at_least_fp32)

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
        if noise is None:
            raise ValueError("a re-noising step needs noise()")
        return self.add_noise(x0, noise().to(x.device, x.dtype), sigma_next)
