"""The training objective: flow matching on RGB latents, chunk by chunk with the streaming session's history.

One training clip = `chunks` consecutive chunks of the renderer's chunk size. For each chunk k, in order:

    history  = LatentHistory (renderer/flash/history.py, the class the live session uses) holding what came
               before chunk k: [anchor | long | mid | short], zeros before the first chunk
    sigma    ~ with probability `discrete_sigma_prob` one of the few-step sampler's own sigmas (the noise levels
               the 4-step sampler visits), else the shifted uniform distribution of flow matching
    x_sigma  = (1 - sigma) z_k + sigma n          (z_k: the chunk's RGB latent, n ~ N(0, 1))
    loss_k   = || v_theta(x_sigma, sigma, G-buffer latent_k, prompt, history) - (n - z_k) ||^2

then chunk k enters the history, as the session pushes it:
    teacher forcing (stage "flow"):      the ground-truth latent z_k
    self-rollout   (stage "rollout"):    the model's own 4-step sample of chunk k (no gradient), so later chunks
                                         learn to continue from what the model really produces when streaming.

Mean flow: for the straight-line coupling above the average velocity over any step [sigma', sigma] equals
n - z, so the mean-flow target on the coupling is the same as the instantaneous one; what makes the few-step
sampler exact is training at the sigmas it visits (the discrete draws).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from renderer.flash.config import FlashConfig
from renderer.flash.history import HistoryInputs, LatentHistory
from renderer.flash.sampler import TIMESTEP_SCALE, FewStepSampler


@dataclass(frozen=True)
class ObjectiveSettings:
    chunks: int = 3                       # chunks per training clip
    discrete_sigma_prob: float = 0.5      # share of sigma draws at the sampler's own noise levels


def batched_history(config: FlashConfig, batch: int, h: int, w: int, device, dtype) -> LatentHistory:
    """The session's LatentHistory, with a batch of B rollouts instead of one."""
    history = LatentHistory(config.history_sizes, config.in_channels, h, w, device, dtype)
    history.buffer = history.buffer.expand(batch, *history.buffer.shape[1:]).clone()
    history.anchor = history.anchor.expand(batch, *history.anchor.shape[1:]).clone()
    return history


def batch_inputs(history: LatentHistory, chunk_latents: int) -> HistoryInputs:
    inputs = history.inputs(chunk_latents)
    b = history.buffer.shape[0]
    return HistoryInputs(**{k: v.expand(b, *v.shape[1:]) if k.startswith("indices") else v
                            for k, v in vars(inputs).items()})


class FlashTrainee(nn.Module):
    """The trained modules in one nn.Module (what DDP / FSDP wrap): the transformer and the G-buffer encoder.
    forward(...) returns the clip's loss; `sample_chunk` is the 4-step sampler the session runs."""

    def __init__(self, config: FlashConfig, transformer: nn.Module, gbuffer_encoder: nn.Module,
                 settings: ObjectiveSettings = ObjectiveSettings(), autocast_dtype: torch.dtype | None = None):
        super().__init__()
        self.config = config
        self.transformer = transformer
        self.gbuffer_encoder = gbuffer_encoder
        self.settings = settings
        self.sampler = FewStepSampler(config.num_steps, config.timestep_shift)
        self.autocast_dtype = autocast_dtype

    def velocity(self, noisy: torch.Tensor, sigma: torch.Tensor, gbuffer_latent: torch.Tensor,
                 prompt: torch.Tensor, history: HistoryInputs) -> torch.Tensor:
        hidden = torch.cat([noisy, gbuffer_latent], dim=1)
        timestep = (sigma * TIMESTEP_SCALE).float()
        with torch.autocast(noisy.device.type, self.autocast_dtype or torch.float32,
                            enabled=self.autocast_dtype is not None):
            out = self.transformer(hidden, timestep, prompt, **history.kwargs(), return_dict=False)[0]
        return out.float()

    @torch.no_grad()
    def sample_chunk(self, gbuffer_latent: torch.Tensor, prompt: torch.Tensor, history: HistoryInputs,
                     generator: torch.Generator) -> torch.Tensor:
        b, _, t, h, w = gbuffer_latent.shape
        sigmas = self.sampler.sigmas().tolist()
        x = torch.randn(b, 16, t, h, w, generator=generator).to(gbuffer_latent.device)
        for i in range(self.sampler.num_steps):
            sigma = torch.full((b,), sigmas[i], device=x.device)
            x = self.sampler.step(x, self.velocity(x, sigma, gbuffer_latent, prompt, history), sigmas[i],
                                  sigmas[i + 1])
        return x

    def draw_sigma(self, batch: int, generator: torch.Generator) -> torch.Tensor:
        s = self.sampler
        u = torch.rand(batch, generator=generator)
        shifted = s.shift * u / (1 + (s.shift - 1) * u)
        levels = s.sigmas()[:-1]
        discrete = levels[torch.randint(len(levels), (batch,), generator=generator)]
        pick = torch.rand(batch, generator=generator) < self.settings.discrete_sigma_prob
        return torch.where(pick, discrete, shifted)

    def forward(self, gbuffer: torch.Tensor, target: torch.Tensor, prompt: torch.Tensor, rollout: bool,
                generator: torch.Generator) -> torch.Tensor:
        """gbuffer (B, T, 5, 3, H, W) in [0, 1]; target RGB latent (B, 16, T/4, h, w); prompt (B, L, D)."""
        cfg = self.config
        gbuffer_latent = self.gbuffer_encoder(gbuffer)                    # (B, 80, T/4, h, w)
        b, _, t_all, h, w = gbuffer_latent.shape
        history = batched_history(cfg, b, h, w, gbuffer_latent.device, torch.float32)
        n = cfg.chunk_latents
        losses, chunks = [], t_all // n
        for k in range(chunks):
            z, g = target[:, :, k * n:(k + 1) * n], gbuffer_latent[:, :, k * n:(k + 1) * n]
            inputs = batch_inputs(history, n)
            sigma = self.draw_sigma(b, generator).to(z.device)
            noise = torch.randn(z.shape, generator=generator).to(z.device)
            noisy = self.sampler.add_noise(z, noise, sigma.view(-1, 1, 1, 1, 1))
            v = self.velocity(noisy, sigma, g, prompt, inputs)
            losses.append(F.mse_loss(v, self.sampler.velocity_target(z, noise)))
            if k == chunks - 1:
                break
            pushed = self.sample_chunk(g.detach(), prompt, inputs, generator) if rollout else z
            history.push(pushed.detach(), g.detach())
        return torch.stack(losses).mean()
