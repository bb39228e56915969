"""`train --refiner`: fit the G-buffer refiner (renderer/flash/refiner.py) after the transformer has trained.

The refiner works on what the model really decodes, so it learns from the trained model's own frames:

    1. stream   per look (a style, or a recording's prompt without --styles) and training recording, `windows`
                windows of `window_frames` frames spread over the recording, through the live FlashSession
                (cold start, as a rollout starts) with the look's prompt → decoded frames beside their G-buffer
                frames and the look's target frames
    2. keys     each look's key: the mean direction of its phrasings' embeddings (the routing's anchors)
    3. head     per look, the quadratic map of [G-buffer, decoded] → target by least squares (normal equations
                over `pixels` random pixels of every frame): the per-pixel baseline's fit with the decoded colour
                among the inputs, so the head starts where that baseline ends and adds what decoding carries
    4. context  the convolutional branch (zero-initialised, so it starts from the head) by Adam on the same
                frames, each with one of its look's phrasings drawn at random; the head stays fixed

The fit's figures (PSNR on the fitted frames of the decoder alone, the head, head + context; the routing's
accuracy on the training phrasings) go to OUT/refiner_fit.json, the context loss to OUT/refiner_log.jsonl.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable

import numpy as np
import torch
import torch.nn.functional as F

from prompt_presets.resolve import conditioning_for
from renderer.flash.pipeline import FlashPipeline
from renderer.flash.refiner import FEATURES, GBufferRefiner, pixel_inputs, pooled_prompt, quadratic_features
from renderer.flash.session import FlashSession
from training.style_targets import gbuffer_frames

RIDGE = 1e-6                 # relative to the mean diagonal of X^T X, as the per-pixel baseline


@dataclass
class RefinerSettings:
    windows: int = 2             # streamed windows per (recording, look)
    window_frames: int = 24      # frames per window (rounded down to whole chunks)
    pixels: int = 2000           # random pixels per frame in the least-squares fit
    steps: int = 300             # Adam steps of the context branch
    batch: int = 4               # frames per step
    lr: float = 2e-3
    hidden: int = 16             # the context branch's width
    seed: int = 0


@dataclass
class Look:
    name: str
    prompt: str                                          # what streams (the preset's own prompt)
    phrasings: tuple[str, ...]                           # its embeddings' key and the context branch's prompts
    recordings: list[int]                                # which training recordings it is fitted on
    target: Callable[[int, list[int]], np.ndarray]       # (recording, frame indices) → uint8 (n, H, W, 3)


@dataclass
class Samples:
    """uint8 frames at the training size: decoded (N, 3, H, W), G-buffer (N, 15, H, W), target (N, 3, H, W)."""

    decoded: torch.Tensor
    gbuffer: torch.Tensor
    target: torch.Tensor
    look: torch.Tensor           # (N,) look index


def window_starts(length: int, frames: int, windows: int, offset: float) -> list[int]:
    """`windows` starts spread over a recording, each on a latent boundary, shifted per look (`offset` in [0, 1))
    so that different looks see different stretches of the track."""
    room = max(length - frames, 0)
    return sorted({int(((w + offset) / windows * room) // 4 * 4) for w in range(windows)})


@torch.no_grad()
def stream_decoded(pipe: FlashPipeline, recording, start: int, frames: int, prompt: str, seed: int) -> np.ndarray:
    """uint8 (frames, H, W, 3): the model streamed over recording[start:start + frames] from a cold start."""
    h, w = recording.gbuffer.shape[-2:]
    chunk = pipe.config.chunk_frames
    cond = conditioning_for(prompt)
    out = []
    with FlashSession(pipe, w, h, seed, chunk) as session:
        for c in range(start, start + frames, chunk):
            block = gbuffer_frames(recording, range(c, c + chunk))
            out.append(session.render(block, [cond] * len(block)).rgb)
    return np.concatenate(out)


def collect(pipe: FlashPipeline, recordings: list, looks: list[Look], s: RefinerSettings) -> Samples:
    frames = max(pipe.config.chunk_frames, s.window_frames // pipe.config.chunk_frames * pipe.config.chunk_frames)
    decoded, gbuffer, target, look = [], [], [], []
    for i, lk in enumerate(looks):
        for k in lk.recordings:
            r = recordings[k]
            for start in window_starts(len(r), frames, s.windows, i / max(len(looks), 1)):
                n = min(frames, len(r) - start) // pipe.config.chunk_frames * pipe.config.chunk_frames
                if n <= 0:
                    continue
                idx = list(range(start, start + n))
                decoded.append(torch.from_numpy(stream_decoded(pipe, r, start, n, lk.prompt, s.seed)))
                gbuffer.append(r.gbuffer[idx].flatten(1, 2))
                target.append(torch.from_numpy(lk.target(k, idx)))
                look.append(torch.full((n,), i))
    chw = lambda parts: torch.cat(parts).permute(0, 3, 1, 2).contiguous()   # noqa: E731
    return Samples(chw(decoded), torch.cat(gbuffer), chw(target), torch.cat(look))


def look_keys(pipe: FlashPipeline, looks: list[Look]) -> torch.Tensor:
    """(S, D): per look the mean of its phrasings' unit embeddings."""
    rows = []
    for lk in looks:
        e = torch.stack([pooled_prompt(pipe.prompts.prompt(t)[None])[0] for t in lk.phrasings])
        rows.append(F.normalize(F.normalize(e.float(), dim=-1).mean(0), dim=0))
    return torch.stack(rows)


def fit_head(samples: Samples, looks: int, pixels: int, seed: int) -> torch.Tensor:
    """(S, 190, 3) least-squares quadratic maps, one per look."""
    gen = torch.Generator().manual_seed(seed)
    xtx = torch.zeros(looks, FEATURES, FEATURES, dtype=torch.float64)
    xty = torch.zeros(looks, FEATURES, 3, dtype=torch.float64)
    n, _, h, w = samples.decoded.shape
    take = min(pixels, h * w)
    for i in range(n):
        pick = torch.randperm(h * w, generator=gen)[:take]
        v = pixel_inputs(samples.decoded[i:i + 1].double() / 255, samples.gbuffer[i:i + 1].double() / 255)
        x = quadratic_features(v.flatten(2)[0, :, pick], dim=0).T                # (take, 190)
        y = samples.target[i].flatten(1)[:, pick].double().T / 255                # (take, 3)
        s = int(samples.look[i])
        xtx[s] += x.T @ x
        xty[s] += x.T @ y
    return torch.stack([solve(a, b) for a, b in zip(xtx.numpy(), xty.numpy())]).float()


def solve(xtx: np.ndarray, xty: np.ndarray) -> torch.Tensor:
    """Ridge-regularised normal equations, as the per-pixel baseline (a collinear feature, e.g. a decoded channel
    stuck at 0, would make them singular); least squares if that is not enough; a look with no samples keeps
    the identity head's zeros."""
    if not xtx.any():
        return torch.zeros(xty.shape, dtype=torch.float64)
    a = xtx + RIDGE * np.trace(xtx) / len(xtx) * np.eye(len(xtx))
    try:
        return torch.from_numpy(np.linalg.solve(a, xty))
    except np.linalg.LinAlgError:
        return torch.from_numpy(np.linalg.lstsq(a, xty, rcond=None)[0])


def psnr(out: torch.Tensor, target: torch.Tensor) -> float:
    mse = F.mse_loss(out.float(), target.float()).item()
    return float(10 * np.log10(1 / max(mse, 1e-10)))


def fit_refiner(pipe: FlashPipeline, recordings: list, looks: list[Look], s: RefinerSettings,
                out: Path | None = None) -> tuple[GBufferRefiner, dict]:
    """The refiner fitted on `pipe`'s decoded frames (pipe has no refiner itself) and its fit report."""
    samples = collect(pipe, recordings, looks, s)
    torch.manual_seed(s.seed)
    refiner = GBufferRefiner(len(looks), pipe.config.text_dim, s.hidden)
    with torch.no_grad():
        refiner.keys.copy_(look_keys(pipe, looks))
        refiner.head.copy_(fit_head(samples, len(looks), s.pixels, s.seed))
    phrasings = [(i, t) for i, lk in enumerate(looks) for t in lk.phrasings]
    embed = lambda text: pooled_prompt(pipe.prompts.prompt(text)[None])[0].float()   # noqa: E731
    embeddings = {t: embed(t) for t in {t for _, t in phrasings} | {lk.prompt for lk in looks}}
    by_look = [[embeddings[t] for t in lk.phrasings] for lk in looks]
    with torch.no_grad():
        routed = refiner.routing(torch.stack([embeddings[t] for _, t in phrasings])).argmax(-1)
    routing_accuracy = float((routed == torch.tensor([i for i, _ in phrasings])).float().mean())

    def batch(idx: torch.Tensor, gen: torch.Generator | None):
        decoded = samples.decoded[idx].float() / 255
        gbuffer = samples.gbuffer[idx].float() / 255
        # training: one of the look's phrasings at random; scoring: the prompt it streamed with
        choice = [by_look[j][int(torch.randint(len(by_look[j]), (1,), generator=gen))] if gen is not None
                  else embeddings[looks[j].prompt] for j in samples.look[idx].tolist()]
        return decoded, gbuffer, torch.stack(choice), samples.target[idx].float() / 255

    def scores() -> dict:
        """PSNR over (up to 64 of) the fitted frames: decoder alone, head alone, the whole refiner."""
        idx = torch.linspace(0, len(samples.look) - 1, min(64, len(samples.look))).long()
        decoded, gbuffer, prompt, target = batch(idx, None)
        with torch.no_grad():
            v = pixel_inputs(decoded, gbuffer)
            head = refiner.head_map(v, refiner.routing(prompt)).clamp(0, 1)
            return {"decoded": round(psnr(decoded, target), 2), "head": round(psnr(head, target), 2),
                    "refined": round(psnr(refiner(decoded, gbuffer, prompt), target), 2)}

    before = scores()
    refiner.keys.requires_grad_(False)
    refiner.sharpness.requires_grad_(False)
    refiner.head.requires_grad_(False)
    params = [p for p in refiner.parameters() if p.requires_grad]
    optimizer = torch.optim.Adam(params, lr=s.lr)
    gen = torch.Generator().manual_seed(s.seed + 1)
    log = (out / "refiner_log.jsonl").open("w") if out is not None else None
    for step in range(1, s.steps + 1):
        idx = torch.randint(len(samples.look), (s.batch,), generator=gen)
        decoded, gbuffer, prompt, target = batch(idx, gen)
        loss = F.mse_loss(refiner(decoded, gbuffer, prompt), target)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        if log is not None and (step % 10 == 0 or step == s.steps):
            log.write(json.dumps({"step": step, "loss": loss.item()}) + "\n")
    if log is not None:
        log.close()
    refiner.requires_grad_(False).eval()
    report = {"settings": asdict(s), "looks": [lk.name for lk in looks], "frames": len(samples.look),
              "recordings": sorted({recordings[k].name for lk in looks for k in lk.recordings}),
              "routing_accuracy_on_phrasings": round(routing_accuracy, 4),
              "psnr_on_fitted_frames": {**before, "refined": scores()["refined"]},
              "parameters": refiner.parameter_count()}
    if out is not None:
        (out / "refiner_fit.json").write_text(json.dumps(report, indent=2))
    return refiner, report
