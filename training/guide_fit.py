"""`alaya-studio train guide`: refit a guided model's G-buffer guide on the frames its own transformer makes.

Why: `train codec --guide` fits the guide (renderer/flash/guide.py) on the TAEHV stack's frames of the *true*
latents, on 48-px crops. The served model hands it the stack's frames of the transformer's latents instead, which
are blurrier, off in colour and off in style, and whole frames, where a shadow's caster is in view. The guide
never saw either. This stage streams the model over its training recordings exactly as a live session does (the
guide off, so what comes out is the stack's frame), once per style with a noise seed of its own, keeps every
`every`-th frame with its G-buffer frame and its style target, and fits the guide on those whole frames by Adam for
a wall-clock budget, starting from the codec's guide, its lr falling along a cosine to 0 at the budget's end (at a
constant lr the last iterate is wherever Adam's noise leaves it; `--constant-lr` keeps the old way).

With `window`, each style streams only that many consecutive frames of a recording, the styles' windows spread
evenly over the drive: long drives in many styles otherwise cost more streaming than fitting (two 1160-frame drives
in 16 styles: 11 of the guide stage's 26 minutes), while the windows together still cover the whole drive. With
`context`, a guide without its global context (renderer/flash/guide.py) is given one here, and (by default) one
without its per-pixel affine head is given that, each zero-initialised so that the guide starts as it was. The
transformer, the decoder stack and the codec stay as they were; only the guide's weights change, written back into
the weights' decoder file (an interrupted run leaves the old file), and `guide_fit.json` beside it says what was
done.

It is the model's own stage, not a lookup: no prompt reaches it, and the style reaches the picture only through
the transformer's latent (the stack's frame). Measured in BENCHMARKS.md ("The guided nano, its guide refitted").

eval's `no_transformer` ablation (training/ablations.py) refits the guide the same way, with the same settings
read from guide_fit.json, on the stack's frames of the zero latent (`zero_latent_guide`): a guide fitted on what
the transformer makes would otherwise be scored on an input it never saw.

    alaya-studio train guide WEIGHTS_DIR [RECORDING...] [--minutes 15] [--styles all] [--every 3] [--window N]
                             [--context] [--no-affine] [--constant-lr]
"""

from __future__ import annotations

import copy
import json
import math
import time
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Callable

import numpy as np
import torch
import torch.nn.functional as F
from safetensors.torch import load_file, save_file

from gbuffer.formats.common import atomic_path
from renderer.flash.guide import GUIDE_KEY, GBufferGuide
from renderer.flash.weights import TINY_DECODER
from training.codec import CODEC_JSON
from training.errors import TrainingError
from training.eval_frames import HeldOutRecording
from training.eval_tasks import Task
from training.model_variants import stack_only, streamed_frames, with_pipeline, without_transformer
from training.style_targets import style_frames

GUIDE_FIT_JSON = "guide_fit.json"
PREFIX = "guide."
GROWN_PARTS = ("ctx.", "coef.")     # the guide's parts `grown` may add: a decoder file without them takes them


@dataclass
class GuideFitSettings:
    minutes: float = 15.0       # Adam's wall-clock budget (the collection before it is not counted)
    every: int = 3              # keep every 3rd frame of each stream: neighbours add little but time
    batch: int = 8              # whole frames a step
    lr: float = 1e-3
    l1_weight: float = 0.1      # beside MSE (what PSNR scores): keeps small errors from being ignored
    seed: int = 0
    window: int = 0             # frames each style streams of a recording; 0: all of them
    context: bool = False       # give a guide without its global context one (zero-initialised)
    # give a guide without its per-pixel affine head one (zero-initialised): +0.85 dB held out, better on 15 of 16
    # styles (BENCHMARKS "The guide's per-pixel affine head"); --no-affine keeps the guide as it is
    affine: bool = True
    # lr follows a cosine to 0 over the budget: at a constant lr the last iterate is wherever Adam's noise leaves it
    # (+0.53 dB held out, 16 of 16 styles, BENCHMARKS "The guide refit with its lr decayed")
    lr_decay: bool = True


@dataclass
class GuideFrames:
    """What the guide is fitted on, uint8: the stack's frames (N, 3, H, W), their G-buffer frames (N, 5, 3, H, W)
    and their style targets (N, 3, H, W)."""

    stack: torch.Tensor
    gbuffer: torch.Tensor
    target: torch.Tensor

    def __len__(self) -> int:
        return len(self.stack)

    def batch(self, index: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        f = lambda x: x[index].float().div_(255)          # noqa: E731
        return f(self.stack), f(self.gbuffer), f(self.target)


def window_starts(frames: int, window: int, streams: int) -> list[int]:
    """Where each of `streams` windows of `window` frames starts in a recording of `frames`: spread evenly from the
    first frame to the last window's, so that together they cover the drive when streams x window >= frames (a
    window never wraps: that would jump the geometry mid-stream). No window, or one as long as the drive: 0 each."""
    if window <= 0 or window >= frames:
        return [0] * streams
    room = frames - window
    return [round(i * room / (streams - 1)) if streams > 1 else 0 for i in range(streams)]


def model_frames(renderer, recordings: list[HeldOutRecording], styles: list[str], every: int, reference,
                 seed: int = 0, on_stream: Callable[[str, str], None] | None = None, window: int = 0) -> GuideFrames:
    """The stack's frames of `renderer` (a guided flash renderer) streamed over each recording once per style (each
    style over its own `window` of frames when one is given), as a live session renders them, every `every`-th
    frame kept with its G-buffer frame and its style target."""
    stacks, gbuffers, targets = [], [], []
    stacked = stack_only(renderer)
    for k, whole in enumerate(recordings):
        # each recording deals its windows to the styles in an order of its own, so that no part of the drive
        # stands for one style in every recording (the guide could read the look off the geometry)
        starts = window_starts(len(whole), window, len(styles))
        order = np.random.default_rng(seed * 131 + k).permutation(len(styles))
        for i, style in enumerate(styles):
            start = starts[order[i]]
            rec = whole.part(start, window) if window > 0 else whole
            gbuffer = rec.recording.gbuffer
            target = style_frames(rec.recording, style, renderer=reference)
            for index, rgb in streamed_frames(stacked, rec, Task(style, style, style), seed * 10007 + k * 101 + i):
                if index % every == 0:
                    stacks.append(torch.from_numpy(rgb).permute(2, 0, 1))
                    gbuffers.append(gbuffer[index])
                    targets.append(torch.from_numpy(target[index]).permute(2, 0, 1))
            if on_stream is not None:
                on_stream(rec.name, style)
    if not stacks:
        raise TrainingError("no frames to fit the guide on (empty recordings or no styles)")
    return GuideFrames(torch.stack(stacks), torch.stack(gbuffers), torch.stack(targets))


def guide_loss(guide: GBufferGuide, frames: GuideFrames, index: torch.Tensor, l1_weight: float) -> torch.Tensor:
    stack, gbuffer, target = frames.batch(index)
    out = guide(stack, gbuffer)
    return F.mse_loss(out, target) + l1_weight * F.l1_loss(out, target)


def fit_guide(guide: GBufferGuide, frames: GuideFrames, s: GuideFitSettings,
              log: Callable[[dict], None] | None = None) -> dict:
    """Adam on whole frames for `s.minutes` of wall time; {steps, seconds, mse_before, mse_after, last_lr}, the MSE
    over a fixed probe of up to 64 frames (the same before and after)."""
    rng = np.random.default_rng(s.seed)
    probe = torch.from_numpy(rng.choice(len(frames), min(64, len(frames)), replace=False))

    @torch.no_grad()
    def probe_mse() -> float:
        return float(np.mean([guide_loss(guide, frames, part, 0.0).item() for part in probe.split(16)]))

    before = probe_mse()
    guide.requires_grad_(True)                 # a renderer loads its weights frozen, for inference
    opt = torch.optim.Adam(guide.parameters(), lr=s.lr)
    start, steps = time.monotonic(), 0
    guide.train()
    while (elapsed := time.monotonic() - start) < s.minutes * 60:
        if s.lr_decay:
            for group in opt.param_groups:
                group["lr"] = s.lr * 0.5 * (1 + math.cos(math.pi * elapsed / (s.minutes * 60)))
        loss = guide_loss(guide, frames, torch.from_numpy(rng.integers(0, len(frames), s.batch)), s.l1_weight)
        opt.zero_grad()
        loss.backward()
        opt.step()
        steps += 1
        if log is not None and steps % 100 == 0:
            log({"step": steps, "loss": loss.item(), "seconds": round(time.monotonic() - start, 1)})
    guide.eval()
    return {"steps": steps, "seconds": round(time.monotonic() - start, 1), "mse_before": round(before, 6),
            "mse_after": round(probe_mse(), 6), "last_lr": opt.param_groups[0]["lr"]}


def grown(guide: GBufferGuide, context: bool = False, affine: bool = False) -> GBufferGuide:
    """`guide` given the parts it lacks of those asked for (its global context, its affine head): the same weights,
    and the new parts starting at zero (the same output)."""
    context, affine = guide.context or context, guide.affine or affine
    if (context, affine) == (guide.context, guide.affine):
        return guide
    out = GBufferGuide(guide.width, context=context, affine=affine).to(next(guide.parameters()).dtype)
    missing, unexpected = out.load_state_dict(guide.state_dict(), strict=False)
    assert not unexpected and all(k.startswith(GROWN_PARTS) for k in missing), (missing, unexpected)
    return out


def write_guide(weights: Path, guide: GBufferGuide) -> None:
    """The guide's weights in place of the old ones in the weights' decoder file, every other tensor as it was (a
    context given by the refit is added beside them, and codec.json says so)."""
    path = weights / TINY_DECODER
    tensors = load_file(path)
    dtype = tensors[GUIDE_KEY].dtype if GUIDE_KEY in tensors else torch.float32
    for name, value in guide.state_dict().items():
        if PREFIX + name not in tensors and not name.startswith(GROWN_PARTS):
            raise TrainingError(f"the decoder file has no {PREFIX + name} to replace", str(path))
        tensors[PREFIX + name] = value.detach().to(dtype).contiguous()
    with atomic_path(path) as tmp:
        save_file(tensors, str(tmp))
    meta_path = weights / CODEC_JSON
    if (guide.context or guide.affine) and meta_path.is_file():
        # The codec's record must say what the file now holds, as the file does (the loaders read the tensors)
        meta = json.loads(meta_path.read_text())
        meta["guide_context"], meta["guide_affine"] = guide.context, guide.affine
        with atomic_path(meta_path) as tmp:
            tmp.write_text(json.dumps(meta, indent=2))


def refitted_guide(renderer, recordings: list[HeldOutRecording], styles: list[str], s: GuideFitSettings,
                   reference, say: Callable[[str], None] = lambda line: None) -> tuple[GBufferGuide, dict]:
    """A copy of `renderer`'s guide fitted on the stack's frames that `renderer` makes (collect, then fit), and
    what was done; nothing is written."""
    decoder = renderer.pipeline.decoder
    torch.manual_seed(s.seed)
    started = time.monotonic()
    frames = model_frames(renderer, recordings, styles, s.every, reference, s.seed,
                          on_stream=lambda rec, style: say(f"streamed {rec} as {style}"), window=s.window)
    collected = round(time.monotonic() - started, 1)
    say(f"{len(frames)} frames in {collected} s; fitting the guide for {s.minutes:g} min")
    guide = copy.deepcopy(decoder.guide).float()
    guide = grown(guide, s.context, s.affine)
    fit = fit_guide(guide, frames, s, log=lambda r: say(f"step {r['step']}: loss {r['loss']:.5f}"))
    return guide, {"settings": asdict(s), "recordings": [r.path.name for r in recordings], "styles": styles,
                   "frames": len(frames), "collect_seconds": collected, **fit}


def refit_guide(renderer, weights: Path, recordings: list[HeldOutRecording], styles: list[str],
                s: GuideFitSettings, reference, say: Callable[[str], None] = lambda line: None) -> dict:
    """Collect, fit, write; returns what guide_fit.json holds."""
    if renderer.pipeline.decoder.guide is None:
        raise TrainingError("has no G-buffer guide to refit (train its codec with --guide WIDTH)", str(weights))
    guide, report = refitted_guide(renderer, recordings, styles, s, reference, say)
    write_guide(weights, guide)
    with atomic_path(weights / GUIDE_FIT_JSON) as tmp:
        tmp.write_text(json.dumps(report, indent=2))
    return report


def read_guide_fit(weights: Path) -> tuple[GuideFitSettings, list[str]] | None:
    """The settings and styles of the refit `train guide` gave these weights (None: their guide was never
    refitted). A guide_fit.json that cannot be read is refused in one line."""
    path = weights / GUIDE_FIT_JSON
    if not path.is_file():
        return None
    try:
        report = json.loads(path.read_text())
        known = {f.name for f in fields(GuideFitSettings)}
        # a record from before lr_decay or affine was a setting was fitted at a constant lr, without the head
        given = {k: v for k, v in report["settings"].items() if k in known}
        settings = GuideFitSettings(**{"lr_decay": False, "affine": False, **given})
        styles = [str(x) for x in report["styles"]]
    except (ValueError, KeyError, TypeError, AttributeError) as e:
        raise TrainingError(f"is not a guide refit's record ({type(e).__name__}: {e})", str(path)) from None
    return settings, styles


def zero_latent_guide(renderer, recordings: list[HeldOutRecording], styles: list[str], s: GuideFitSettings,
                      reference, say: Callable[[str], None] = lambda line: None) -> tuple[GBufferGuide, dict]:
    """The guide of eval's `no_transformer` ablation: `renderer`'s guide refitted as `train guide` refits it, on
    the stack's frames of the zero latent (no transformer runs) instead of the transformer's. Fitted on what it
    will be fed, it is that ablation's strongest guide, not the model's guide with an input taken away."""
    zero = with_pipeline(renderer, without_transformer(renderer.pipeline))
    return refitted_guide(zero, recordings, styles, s, reference, say)
