"""Few-step flow sampler (rectified flow / mean flow), no classifier-free guidance.

Convention (Wan 2.1, flow matching): x_sigma = (1 - sigma) * x0 + sigma * noise, sigma in [0, 1]; the model
gets timestep = 1000 * sigma and predicts the velocity v = noise - x0. A mean-flow distilled model predicts
the *average* velocity over the step it is asked to take, so the update is the same exact Euler form
    x_next = x + (sigma_next - sigma) * u.
Sigmas: `num_steps` evenly spaced in (0, 1], bent towards high noise by the shift (as Wan/SD3):
    sigma' = shift * sigma / (1 + (shift - 1) * sigma).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

TIMESTEP_SCALE = 1000.0


@dataclass(frozen=True)
class FewStepSampler:
    num_steps: int = 4
    shift: float = 5.0

    def sigmas(self) -> torch.Tensor:
        """(num_steps + 1,) float32 from 1 down to 0."""
        s = torch.linspace(1.0, 0.0, self.num_steps + 1, dtype=torch.float32)
        return self.shift * s / (1 + (self.shift - 1) * s)

    def timesteps(self) -> torch.Tensor:
        return self.sigmas()[:-1] * TIMESTEP_SCALE

    @staticmethod
    def add_noise(x0: torch.Tensor, noise: torch.Tensor, sigma: torch.Tensor | float) -> torch.Tensor:
        return (1 - sigma) * x0 + sigma * noise

    @staticmethod
    def velocity_target(x0: torch.Tensor, noise: torch.Tensor) -> torch.Tensor:
        return noise - x0

    @staticmethod
    def step(x: torch.Tensor, velocity: torch.Tensor, sigma: float, sigma_next: float) -> torch.Tensor:
        return x + (sigma_next - sigma) * velocity
