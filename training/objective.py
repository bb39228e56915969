"""The training objective: flow matching or mean flow on RGB latents, chunk by chunk with the streaming history.

One training clip = `warmup` + `chunks` consecutive chunks of the renderer's chunk size. For each chunk k, in order:

    history  = LatentHistory (renderer/flash/history.py, the class the live session uses) holding what came
               before chunk k: [anchor | long | mid | short], zeros before the first chunk
    warm-up  the first `warmup` chunks only fill the history (no loss, no gradient): with nano's history (4, 2, 1)
             and 2-latent chunks the long tier holds nothing until 2 chunks were pushed, so without one a clip of
             two trained chunks never trains it (the trainer draws `warmup` per step: 0 keeps the empty-history start)
    sigma    ~ with probability `discrete_sigma_prob` one of the few-step sampler's own sigmas (the noise levels
               the 4-step sampler visits), else the shifted uniform distribution of flow matching
    x_sigma  = (1 - sigma) z_k + sigma n          (z_k: the chunk's RGB latent, n ~ N(0, 1), v = n - z_k)
    flow      loss_k = || v_theta(x_sigma, sigma, G-buffer latent_k, prompt, history) - v ||^2
    meanflow  loss_k = w || u_theta(x_t, r, t, ...) - sg(v - (t - r) du/dt) ||^2   (`mean_flow_loss`; the
              discrete draws are the sampler's own jumps (t, r) = (sigma_i, sigma_i+1); the model embeds t - r;
              w = sg(1 / (||.||^2 + c)), the paper's adaptive weight: unweighted, a nano from scratch diverged)
    GAN       optional (training/gan.py): the last chunk's predicted landing point, decoded, against the decoded
              truth there, through a patch discriminator

then chunk k enters the history, as the session pushes it:
    teacher forcing (stage "flow"):      the ground-truth latent z_k
    self-rollout   (stage "rollout"):    the model's own 4-step sample of chunk k (no gradient), so later chunks
                                         learn to continue from what the model really produces when streaming.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Literal

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.attention import SDPBackend, sdpa_kernel

from renderer.flash.config import FlashConfig
from renderer.flash.history import HistoryInputs, LatentHistory
from renderer.flash.sampler import FewStepSampler
from renderer.flash.taehv import StreamMemory

Objective = Literal["flow", "meanflow"]
OBJECTIVES = ("flow", "meanflow")


@dataclass(frozen=True)
class ObjectiveSettings:
    chunks: int = 3                       # trained chunks per clip (after the warm-up ones)
    discrete_sigma_prob: float = 0.5      # share of sigma draws at the sampler's own noise levels (and jumps)
    objective: Objective = "flow"
    interval_prob: float = 0.5            # mean flow, continuous draws: share with r < t (else r = t: plain flow)


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


def warmup_chunks_to_reach_long(config: FlashConfig, chunks: int) -> int:
    """The fewest warm-up chunks with which the last of `chunks` trained chunks sees the long history tier:
    more than mid + short latent frames pushed before it (nano, 2-latent chunks: 1 for --chunks 2, 0 for 3)."""
    _, mid, short = config.history_sizes
    return max(0, -(-(mid + short + 1) // config.chunk_latents) - (chunks - 1))


AverageVelocity = Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]


# MeanFlow's adaptive loss weight, w = sg(1 / (||error||^2 + c)^p) per sample (Geng et al. 2025, p = 1 on ImageNet):
# the target holds the model's own du/dt, which an untrained transformer makes large; unweighted, a large error
# grows the next target and the loss runs away (a nano from scratch at lr 1e-3: 77 at step 10, 2.7e6 at 440)
ADAPTIVE_POWER = 1.0
ADAPTIVE_C = 1e-3


def mean_flow_loss(u_fn: AverageVelocity, z: torch.Tensor, noise: torch.Tensor, t: torch.Tensor,
                   r: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, float]:
    """MeanFlow (Geng et al. 2025) on the coupling x_t = (1 - t) z + t n, v = n - z: the average velocity
    u(x_t, r, t) = 1/(t - r) * integral_r^t v ds obeys u = v - (t - r) du/dt, with the total derivative
    du/dt = v . du/dx + du/dt along the path (r fixed): a JVP with tangents (v, 0, 1) for (x, r, t), under
    stop-gradient. `u_fn(x, r, t)` with t, r of shape (B,); returns (loss, u, x_t, the unweighted squared error).
    Costs one forward plus a JVP (no graph kept) on top of flow matching's forward. Each sample's squared error is
    weighted adaptively (ADAPTIVE_POWER), so the loss is near 1 whatever its scale: the unweighted error is what
    says whether the model learns (the trainer logs it as `mse`)."""
    shape = (-1,) + (1,) * (z.ndim - 1)
    x = FewStepSampler.add_noise(z, noise, t.view(shape))
    v = FewStepSampler.velocity_target(z, noise)
    u = u_fn(x, r, t)
    target = v - (t - r).view(shape) * total_derivative(u_fn, x, r, t, v)
    error = (u - target).pow(2).flatten(1).mean(1)
    weight = (error.detach() + ADAPTIVE_C).pow(-ADAPTIVE_POWER)
    return (weight * error).mean(), u, x, float(error.detach().mean())


def total_derivative(u_fn: AverageVelocity, x: torch.Tensor, r: torch.Tensor, t: torch.Tensor,
                     v: torch.Tensor) -> torch.Tensor:
    """d/dt u(x_t, r, t) along dx/dt = v with r fixed: one forward-mode JVP, no graph (the target is stop-grad)."""
    with torch.no_grad(), sdpa_kernel(SDPBackend.MATH):      # forward AD has no fused-attention kernel
        return torch.func.jvp(lambda x_, t_: u_fn(x_, r, t_), (x, t), (v, torch.ones_like(t)))[1]


class FlashTrainee(nn.Module):
    """The trained modules in one nn.Module (what DDP / FSDP wrap): the transformer and the G-buffer encoder.
    forward(...) returns the clip's loss; `sample_chunk` is the 4-step sampler the session runs. `gan`
    (training/gan.GanTerm) is held outside the module tree: its discriminator has its own optimiser."""

    def __init__(self, config: FlashConfig, transformer: nn.Module, gbuffer_encoder: nn.Module,
                 settings: ObjectiveSettings = ObjectiveSettings(), autocast_dtype: torch.dtype | None = None,
                 gan=None):
        super().__init__()
        if settings.objective == "meanflow" and not config.interval_embedding:
            raise ValueError("mean flow needs a config with interval_embedding (the model embeds t - r)")
        self.config = config
        self.transformer = transformer
        self.gbuffer_encoder = gbuffer_encoder
        self.settings = settings
        self.sampler = FewStepSampler(config.num_steps, config.timestep_shift, mean_flow=config.interval_embedding)
        self.autocast_dtype = autocast_dtype
        self.gan = [gan] if gan is not None else []          # a list: not a submodule
        self.unweighted_mse: float | None = None             # mean flow: the last forward's error before weighting

    def velocity(self, noisy: torch.Tensor, sigma: torch.Tensor, gbuffer_latent: torch.Tensor,
                 prompt: torch.Tensor, history: HistoryInputs, jump_end: torch.Tensor | None = None) -> torch.Tensor:
        """v at sigma; a mean-flow model's average velocity from sigma to `jump_end` (default: sigma itself,
        the instantaneous velocity)."""
        if self.sampler.mean_flow and jump_end is None:
            jump_end = sigma
        hidden = torch.cat([noisy, gbuffer_latent], dim=1)
        timestep = self.sampler.timestep_input(sigma, jump_end)
        with torch.autocast(noisy.device.type, self.autocast_dtype or torch.float32,
                            enabled=self.autocast_dtype is not None):
            out = self.transformer(hidden, timestep, prompt, **history.kwargs(), return_dict=False)[0]
        return out.to(torch.promote_types(noisy.dtype, torch.float32))       # bf16 autocast → fp32

    @torch.no_grad()
    def sample_chunk(self, gbuffer_latent: torch.Tensor, prompt: torch.Tensor, history: HistoryInputs,
                     generator: torch.Generator) -> torch.Tensor:
        b, _, t, h, w = gbuffer_latent.shape
        sigmas = self.sampler.sigmas().tolist()
        x = torch.randn(b, 16, t, h, w, generator=generator).to(gbuffer_latent.device)
        for i in range(self.sampler.num_steps):
            sigma = torch.full((b,), sigmas[i], device=x.device)
            jump = self.sampler.jump_end(i)
            end = None if jump is None else torch.full((b,), jump, device=x.device)
            x = self.sampler.step(x, self.velocity(x, sigma, gbuffer_latent, prompt, history, end), sigmas[i],
                                  sigmas[i + 1])
        return x

    def shifted_uniform(self, batch: int, generator: torch.Generator) -> torch.Tensor:
        """Flow matching's noise levels: uniform, bent towards high noise by the sampler's shift."""
        u, shift = torch.rand(batch, generator=generator), self.sampler.shift
        return shift * u / (1 + (shift - 1) * u)

    def draw_sigma(self, batch: int, generator: torch.Generator) -> torch.Tensor:
        s = self.sampler
        shifted = self.shifted_uniform(batch, generator)
        levels = s.sigmas()[:-1]
        discrete = levels[torch.randint(len(levels), (batch,), generator=generator)]
        pick = torch.rand(batch, generator=generator) < self.settings.discrete_sigma_prob
        return torch.where(pick, discrete, shifted)

    def draw_interval(self, batch: int, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        """Mean flow's (t, r): the sampler's own jumps (sigma_i, sigma_i+1) for `discrete_sigma_prob` of the
        draws, else t shifted-uniform and r uniform below it (`interval_prob`) or r = t."""
        s = self.sampler
        shifted = self.shifted_uniform(batch, generator)
        levels = s.sigmas()
        i = torch.randint(s.num_steps, (batch,), generator=generator)
        pick = torch.rand(batch, generator=generator) < self.settings.discrete_sigma_prob
        below = torch.rand(batch, generator=generator) < self.settings.interval_prob
        r = torch.where(below, shifted * torch.rand(batch, generator=generator), shifted)
        return torch.where(pick, levels[i], shifted), torch.where(pick, levels[i + 1], r)

    def chunk_loss(self, z: torch.Tensor, g: torch.Tensor, prompt: torch.Tensor, inputs: HistoryInputs,
                   generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """One chunk's loss, plus where its prediction lands and the truth there (for the GAN term): flow's
        x0 estimate vs z; mean flow's jump to r vs the coupling's point at r."""
        b = z.shape[0]
        shape = (-1, 1, 1, 1, 1)
        if self.settings.objective == "meanflow":
            t, r = (x.to(z.device) for x in self.draw_interval(b, generator))
            noise = torch.randn(z.shape, generator=generator).to(z.device)
            loss, u, x, mse = mean_flow_loss(lambda x_, r_, t_: self.velocity(x_, t_, g, prompt, inputs, r_),
                                             z, noise, t, r)
            self._chunk_mse.append(mse)
            return loss, x - (t - r).view(shape) * u, self.sampler.add_noise(z, noise, r.view(shape))
        sigma = self.draw_sigma(b, generator).to(z.device)
        noise = torch.randn(z.shape, generator=generator).to(z.device)
        noisy = self.sampler.add_noise(z, noise, sigma.view(shape))
        v = self.velocity(noisy, sigma, g, prompt, inputs)
        return F.mse_loss(v, self.sampler.velocity_target(z, noise)), noisy - sigma.view(shape) * v, z

    def encode_gbuffer(self, gbuffer: torch.Tensor, warmup: int) -> torch.Tensor:
        """(B, T, 5, 3, H, W) → (B, 80, T/4, h, w); the warm-up chunks' frames without a gradient, their
        encoder memory carried into the trained frames as when streaming."""
        memory, split = StreamMemory(), warmup * self.config.chunk_frames
        if not split:
            return self.gbuffer_encoder(gbuffer, memory)
        with torch.no_grad():
            early = self.gbuffer_encoder(gbuffer[:, :split], memory)
        return torch.cat([early, self.gbuffer_encoder(gbuffer[:, split:], memory)], dim=2)

    def forward(self, gbuffer: torch.Tensor, target: torch.Tensor, prompt: torch.Tensor, rollout: bool,
                generator: torch.Generator, warmup: int = 0) -> torch.Tensor:
        """gbuffer (B, T, 5, 3, H, W) in [0, 1]; target RGB latent (B, 16, T/4, h, w); prompt (B, L, D); the
        first `warmup` chunks only fill the history."""
        cfg = self.config
        gbuffer_latent = self.encode_gbuffer(gbuffer, warmup)          # (B, 80, T/4, h, w)
        b, _, t_all, h, w = gbuffer_latent.shape
        history = batched_history(cfg, b, h, w, gbuffer_latent.device, torch.float32)
        n = cfg.chunk_latents
        losses, chunks = [], t_all // n
        self._chunk_mse: list[float] = []
        for k in range(chunks):
            z, g = target[:, :, k * n:(k + 1) * n], gbuffer_latent[:, :, k * n:(k + 1) * n]
            inputs = batch_inputs(history, n)
            if k >= warmup:
                loss, landing, truth = self.chunk_loss(z, g, prompt, inputs, generator)
                losses.append(loss)
            if k == chunks - 1:
                break
            pushed = self.sample_chunk(g.detach(), prompt, inputs, generator) if rollout else z
            history.push(pushed.detach(), g.detach())
        loss = torch.stack(losses).mean()
        self.unweighted_mse = sum(self._chunk_mse) / len(self._chunk_mse) if self._chunk_mse else None
        if self.gan:
            loss = loss + self.gan[0].generator_loss(landing, truth)
        return loss
