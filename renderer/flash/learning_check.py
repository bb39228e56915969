"""A learning check for the sampler, timestep convention and prompt conditioning (used by bench and tests).

Task: G-buffer → RGB where the RGB frame is the albedo tinted by a prompt-dependent colour. The target RGB
latent is what the (frozen) G-buffer encoder's albedo branch makes of the *tinted* albedo, normalised to unit
variance (the model works in a latent space, as Flash does; with random codecs there is no RGB latent space to
borrow). The transformer is trained with the flow-matching loss of sampler.py, then the 4-step sampler has to
reproduce the target from pure noise. If the timestep convention, the update rule or the prompt path were
wired wrong, the sampled latents would not approach the targets (and the wrong prompt would fit as well as
the right one).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import torch

from renderer.flash.config import LATENT_CHANNELS, TEMPORAL_SCALE
from renderer.flash.history import HistoryInputs, LatentHistory
from renderer.flash.pipeline import FlashPipeline

TINTS = {"a world painted red": (1.0, 0.25, 0.2), "a world painted blue": (0.2, 0.35, 1.0)}


@dataclass
class Batch:
    gbuffer_latent: torch.Tensor    # (B, 80, t, h, w)
    target: torch.Tensor            # (B, 16, t, h, w) normalised
    prompt: torch.Tensor            # (B, text_len, text_dim)
    prompt_index: torch.Tensor      # (B,) index into TINTS


def gbuffer_frames(batch: int, frames: int, height: int, width: int, gen: torch.Generator) -> torch.Tensor:
    """(B, T, 5, 3, H, W): albedo a 2x2 grid of flat colours, the other channels flat random greys."""
    colours = torch.rand(batch, 1, 3, 2, 2, generator=gen)
    albedo = torch.nn.functional.interpolate(colours[:, 0], size=(height, width), mode="nearest")
    other = torch.rand(batch, 4, 1, 1, 1, generator=gen).expand(batch, 4, 3, height, width)
    x = torch.cat([albedo.unsqueeze(1), other], dim=1)
    return x.unsqueeze(1).expand(batch, frames, 5, 3, height, width).contiguous()


class LearningTask:
    def __init__(self, pipe: FlashPipeline, height: int = 32, width: int = 64, seed: int = 0,
                 dataset_size: int = 64):
        self.pipe, self.height, self.width = pipe, height, width
        cfg = pipe.config
        self.frames = cfg.chunk_latents * TEMPORAL_SCALE
        self.prompts = torch.stack([pipe.prompts.prompt(t) for t in TINTS])             # (P, L, D)
        self.tints = torch.tensor(list(TINTS.values()))                                 # (P, 3)
        self.gen = torch.Generator().manual_seed(seed)
        self.scale = 1.0                                  # make_batch divides by it: measure it first
        self.scale = float(self.make_batch(16).target.std())
        self.data = self.make_batch(dataset_size)      # encoded once: the codecs are frozen

    def batch(self, size: int) -> Batch:
        i = torch.randint(self.data.target.shape[0], (size,), generator=self.gen)
        return Batch(self.data.gbuffer_latent[i], self.data.target[i], self.data.prompt[i], self.data.prompt_index[i])

    @torch.no_grad()
    def make_batch(self, size: int) -> Batch:
        x = gbuffer_frames(size, self.frames, self.height, self.width, self.gen)
        which = torch.randint(len(TINTS), (size,), generator=self.gen)
        tinted = x.clone()
        tinted[:, :, 0] = x[:, :, 0] * self.tints[which].view(size, 1, 3, 1, 1)
        g = self.pipe.encode_gbuffer(x).float()
        target = self.pipe.encode_gbuffer(tinted).float()[:, :LATENT_CHANNELS] / self.scale
        return Batch(g, target, self.prompts[which], which)

    def history(self, size: int) -> HistoryInputs:
        """First-chunk history (all zeros), expanded to the batch."""
        h = LatentHistory(self.pipe.config.history_sizes, self.pipe.config.in_channels, self.height // 8,
                          self.width // 8, self.pipe.device, self.pipe.dtype).inputs(self.pipe.config.chunk_latents)
        return HistoryInputs(*(t.expand(size, *t.shape[1:]) for t in vars(h).values()))

    def train(self, steps: int, batch_size: int = 8, lr: float = 4e-3) -> list[float]:
        model = self.pipe.transformer.requires_grad_(True).train()
        opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
        sampler, losses = self.pipe.sampler, []
        for _ in range(steps):
            b = self.batch(batch_size)
            # sigma drawn uniformly, then shifted like the sampler's schedule (more weight on high noise)
            u = torch.rand(batch_size, generator=self.gen)
            sigma = sampler.shift * u / (1 + (sampler.shift - 1) * u)
            noise = torch.randn(b.target.shape, generator=self.gen)
            noisy = sampler.add_noise(b.target, noise, sigma.view(-1, 1, 1, 1, 1))
            hidden = torch.cat([noisy, b.gbuffer_latent], dim=1)
            v = model(hidden, sigma * 1000.0, b.prompt, **self.history(batch_size).kwargs(), return_dict=False)[0]
            loss = torch.nn.functional.mse_loss(v, sampler.velocity_target(b.target, noise))
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
        model.requires_grad_(False).eval()
        return losses

    @torch.no_grad()
    def sample_error(self, batch_size: int = 8, swap_prompts: bool = False, seed: int = 123) -> float:
        """Relative MSE of 4-step samples against the targets (1.0 = as far as the targets' own spread)."""
        gen_state = self.gen.get_state()
        self.gen.manual_seed(seed)
        b = self.make_batch(batch_size)                 # fresh G-buffers, not seen in training
        prompt = self.prompts[1 - b.prompt_index] if swap_prompts else b.prompt
        noise = torch.randn(b.target.shape, generator=self.gen)
        x = self.pipe.denoise(noise, b.gbuffer_latent, prompt, self.history(batch_size))
        self.gen.set_state(gen_state)
        return float(((x - b.target) ** 2).mean() / b.target.var())


def learning_check(steps: int = 300, seed: int = 0, config: str = "tiny") -> dict:
    pipe = FlashPipeline.random(config, seed=seed, prompts=list(TINTS), device="cpu")
    task = LearningTask(pipe, seed=seed)
    before = task.sample_error()
    start = time.perf_counter()
    losses = task.train(steps)
    seconds = time.perf_counter() - start
    return {"steps": steps, "train_seconds": round(seconds, 1),
            "loss_first": round(sum(losses[:10]) / 10, 4), "loss_last": round(sum(losses[-10:]) / 10, 4),
            "error_untrained": round(before, 4), "error_trained": round(task.sample_error(), 4),
            "error_trained_wrong_prompt": round(task.sample_error(swap_prompts=True), 4)}
