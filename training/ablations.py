"""`eval --baselines`: the ablations and the conv baseline beside the baselines, and each row's frames.

    ablations.decoder_only     the model as trained, refiner off: the decoder's frames tapped before the G-buffer
                               refiner (the same session, noise and history; only `pipeline.refiner` is dropped),
                               streamed with every noise seed; its prompt accuracy as the model's (--styles). A
                               guided decoder (renderer/flash/guide.py) has no refiner: its row is the model's
    ablations.no_transformer   the strongest model built from the same parts without the transformer: every
                               chunk's denoised latent replaced by a zero latent, in fitting as in scoring, so the
                               decoder turns it into the same fixed frame; the refiner is then fitted on that input
                               by the model's own recipe (training/refiner_fit.py: routing keys, least-squares
                               quadratic head over [G-buffer, decoded], context branch by Adam, the model's
                               refiner settings from train_settings.json) on the per-pixel baseline's recordings,
                               one look per task of this eval. It is a refiner that never had a transformer to lean
                               on, not the model with an input taken away; deterministic, so one noise seed. A
                               guided decoder's guide is first refitted on the zero latent's frames as `train guide`
                               refitted the model's on its transformer's (training/guide_fit.py: the settings and
                               styles of guide_fit.json, the same minutes unless --ablation-guide-minutes), and the
                               refiner is fitted after it
    baselines.conv             training/conv_baseline.py, fitted within --conv-minutes on the same recordings
    transformer_contribution   overall minus no_transformer (PSNR dB, SSIM), overall and per task key

The hook: `row_frames(evaluation)` → {row name: fn(evaluation, test, task, seed)}, each fn yielding
(frame index, uint8 (H, W, 3)) in stream order, for the rows this evaluation computed ("model", "decoder_only",
"no_transformer", "per_pixel", "conv"). Scoring here reads the rows through it. `region_rows(evaluation)` gives
the three rows eval_regions.py does not make itself as its `extra` takes them ({row: fn(test, task) → uint8
(N, H, W, 3)}), for `context_blocks(evaluation, not_computed, extra=region_rows(evaluation))`.
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator, Protocol

import numpy as np
import torch

from prompt_presets.resolve import resolve_prompt
from training.bookkeeping import read_settings
from training.conv_baseline import CONV_FRAMES, ConvFrames, fit_conv
from training.eval_frames import HeldOutRecording, open_held_out
from training.eval_prompt_control import StyleAccuracy
from training.eval_tasks import BLOCK, EvalOptions, Task
from training.guide_fit import read_guide_fit, zero_latent_guide
from training.metrics import StreamMetrics
from training.model_variants import decoder_only, streamed_frames, with_guide, with_pipeline, without_transformer
from training.refiner_fit import Look, RefinerSettings, fit_refiner
from training.style_targets import style_frames

if TYPE_CHECKING:
    from renderer.base import Renderer
    from training.conv_baseline import ConvBaseline


class Evaluation(Protocol):
    """What the ablations read of the evaluation that builds them (training/eval_run.py's `Evaluation`); named
    here so that this module does not import the evaluation that imports it."""

    o: EvalOptions
    renderer: Any
    reference: Any
    maps: dict
    seeds: list[int]
    tests: list[HeldOutRecording]
    ablations: "Ablations | None"


RowFrames = Callable[[Evaluation, HeldOutRecording, Task, int], Iterator[tuple[int, np.ndarray]]]


# ---- the no_transformer refit ----------------------------------------------------------------------------

def refiner_settings(weights: str) -> RefinerSettings:
    """The model's own refiner recipe from train_settings.json (the defaults where it names none)."""
    s = read_settings(weights)
    d = RefinerSettings()
    pick = lambda key, default: s[key] if isinstance(s.get(key), int) and s[key] >= 1 else default  # noqa: E731
    return RefinerSettings(windows=pick("refiner_windows", d.windows), window_frames=pick("refiner_frames",
                           d.window_frames), steps=pick("refiner_steps", d.steps),
                           seed=s["seed"] if isinstance(s.get("seed"), int) else d.seed)


def task_looks(tasks: list[Task], recordings: list, reference) -> list[Look]:
    """One look per distinct task prompt, fitted on every recording against that task's target."""
    chosen: dict[str, str] = {}
    for t in tasks:
        chosen.setdefault(t.prompt, t.target)
    def frames(target: str) -> Callable[[int, list[int]], np.ndarray]:
        return lambda k, idx: style_frames(recordings[k], target, idx, renderer=reference)

    looks = []
    for prompt, target in chosen.items():
        text = resolve_prompt(prompt).text
        looks.append(Look(prompt[:40], text, (text,), list(range(len(recordings))), frames(target)))
    return looks


# ---- each row's frames (the hook) -------------------------------------------------------------------------

def _mapped(predict: Callable[[np.ndarray], np.ndarray], test) -> Iterator[tuple[int, np.ndarray]]:
    for start in range(0, len(test), BLOCK):
        for k, frame in enumerate(predict(test.gbuffer(start, start + BLOCK))):
            yield start + k, frame


def _ablations(ev: "Evaluation") -> "Ablations":
    if ev.ablations is None:
        raise RuntimeError("the ablation rows need the ablations fitted (eval --baselines)")
    return ev.ablations


ROWS: dict[str, RowFrames] = {
    "model": lambda ev, test, task, seed: streamed_frames(ev.renderer, test, task, seed),
    "decoder_only": lambda ev, test, task, seed: streamed_frames(_ablations(ev).decoder_only, test, task, seed),
    "no_transformer": lambda ev, test, task, seed: streamed_frames(_ablations(ev).no_transformer, test, task,
                                                                   seed),
    "per_pixel": lambda ev, test, task, seed: _mapped(ev.maps[task.target].predict, test),
    "conv": lambda ev, test, task, seed: _mapped(lambda g: _ablations(ev).conv.predict(g, task.target), test),
}


def row_frames(ev: Evaluation) -> dict[str, RowFrames]:
    """The rows `ev` can render: the model always; the others once fitted (eval --baselines)."""
    ab = getattr(ev, "ablations", None)
    have = {"model": True, "per_pixel": bool(ev.maps), "decoder_only": ab is not None and ab.decoder_only is not None,
            "no_transformer": ab is not None and ab.no_transformer is not None,
            "conv": ab is not None and ab.conv is not None}
    return {name: fn for name, fn in ROWS.items() if have[name]}


def region_rows(ev: Evaluation) -> dict[str, Callable[[HeldOutRecording, Task], np.ndarray]]:
    """decoder_only, no_transformer and conv as eval_regions.context_blocks' `extra` rows: fn(test, task) → uint8
    (N, H, W, 3), the first noise seed (as its model row)."""
    def stacked(row: RowFrames) -> Callable:
        def frames(test, task) -> np.ndarray:
            out = np.empty((len(test), *test.recording.gbuffer.shape[-2:], 3), np.uint8)
            for i, frame in row(ev, test, task, ev.seeds[0]):
                out[i] = frame
            return out
        return frames

    return {name: stacked(fn) for name, fn in row_frames(ev).items() if name not in ("model", "per_pixel")}


# ---- fitted once, scored per recording --------------------------------------------------------------------

class Ablations:
    """Built by Evaluation with --baselines, after the per-pixel fit (which has refused any fit recording that is,
    or shares a frame with, a test recording); `score` per test recording, `report` into the result."""

    decoder_only: Renderer | None        # the model without its G-buffer refiner (None: it has none)
    no_transformer: Renderer | None      # every latent zero, the refiner refitted (None: not a flash model)
    conv: ConvBaseline

    def __init__(self, ev: Evaluation):
        from training.eval_tasks import tasks_for, training_recordings

        self.ev, o = ev, ev.o
        self.not_computed: dict[str, str] = {}
        self.metrics: dict[str, dict[str, StreamMetrics]] = {"decoder_only": {}, "no_transformer": {}, "conv": {}}
        self.control = StyleAccuracy() if o.styles and len(o.styles) >= 2 else None
        tasks = [t for test in ev.tests for t in tasks_for(test.path, o)]
        styles = sorted({t.target for t in tasks})
        h, w = ev.tests[0].recording.gbuffer.shape[-2:]
        fits = [open_held_out(p, (w, h), None) for p in (o.fit or training_recordings(o.weights))]
        recordings = [r.recording for r in fits]
        self.conv, self.conv_fit = fit_conv(self._conv_frames(recordings, styles), styles, o.conv_minutes, o.seed)
        self.decoder_only = decoder_only(ev.renderer)
        pipe = getattr(ev.renderer, "pipeline", None)
        # a guided decoder (renderer/flash/guide.py) is the whole picture path: its decoder_only is the model
        self.guided = pipe is not None and pipe.decoder.guide is not None and pipe.refiner is None
        if self.decoder_only is None and not self.guided:
            self.not_computed["decoder_only"] = "the model has no G-buffer refiner: its own frames are the decoder's"
        self.no_transformer, self.no_transformer_fit = None, None
        if pipe is None:
            self.not_computed["no_transformer"] = "not a flash model: there is no transformer to take away"
        else:
            t0 = time.perf_counter()
            guide_fit: dict | str | None = None
            if self.guided:
                pipe, guide_fit = self._zero_latent_guide(pipe, fits)
            refiner, report = fit_refiner(without_transformer(pipe), recordings,
                                          task_looks(tasks, recordings, ev.reference), refiner_settings(o.weights))
            self.no_transformer = with_pipeline(ev.renderer, without_transformer(pipe, refiner.to(pipe.device,
                                                                                                 pipe.dtype)))
            self.no_transformer_fit = {**report, "seconds": round(time.perf_counter() - t0, 1),
                                       "latent": "zero (no transformer), in fitting as in scoring",
                                       **({"guide": guide_fit} if guide_fit is not None else {})}

    def _zero_latent_guide(self, pipe, fits: list[HeldOutRecording]) -> tuple[Any, dict | str]:
        """A guided model's pipeline with its guide refitted on the zero latent's frames, as the model's own was
        refitted on its transformer's (the same settings and styles, --ablation-guide-minutes aside), and what was
        done. Where the model's guide was never refitted, both keep the codec's, fitted on true latents."""
        o = self.ev.o
        prior = read_guide_fit(Path(o.weights))
        if prior is None:
            return pipe, "the model's own: it was never refitted (train guide), so neither is the ablation's"
        settings, styles = prior
        if o.ablation_guide_minutes is not None:
            settings = dataclasses.replace(settings, minutes=o.ablation_guide_minutes)
        guide, report = zero_latent_guide(self.ev.renderer, fits, styles, settings, self.ev.reference)
        return with_guide(pipe, guide), {**report, "refitted_on": "the stack's frames of the zero latent, from the "
                                         "model's refitted guide"}

    def _conv_frames(self, recordings: list, styles: list[str]) -> ConvFrames:
        gbuffer, targets = [], []
        for rec in recordings:
            idx = np.unique(np.linspace(0, len(rec) - 1, min(CONV_FRAMES, len(rec))).round().astype(int)).tolist()
            gbuffer.append(rec.gbuffer[idx].flatten(1, 2))
            targets.append(torch.stack([torch.from_numpy(style_frames(rec, s, idx, renderer=self.ev.reference))
                                        .permute(0, 3, 1, 2) for s in styles], dim=1))
        return ConvFrames(torch.cat(gbuffer), torch.cat(targets))

    def _score(self, row: str, test, task, seed: int, target: np.ndarray, targets: dict | None = None
               ) -> StreamMetrics:
        m = StreamMetrics()
        for i, frame in ROWS[row](self.ev, test, task, seed):
            m.update(frame, target[i])
            if targets is not None and self.control is not None:
                self.control.update(task.key, frame, {s: targets[s][i] for s in self.ev.o.styles or ()})
        return m

    def score(self, test, tasks: list[Task], targets: dict[str, np.ndarray]) -> None:
        """Every row on `test`'s tasks, against the same targets as the model."""
        add = lambda row, key, m: self.metrics[row].__setitem__(  # noqa: E731
            key, self.metrics[row].get(key, StreamMetrics()).merged(m))
        for task in tasks:
            target = targets[task.target]
            add("conv", task.key, self._score("conv", test, task, 0, target))
            if self.no_transformer is not None:
                add("no_transformer", task.key, self._score("no_transformer", test, task, self.ev.seeds[0], target))
            if self.decoder_only is not None:
                for seed in self.ev.seeds:
                    add("decoder_only", task.key, self._score("decoder_only", test, task, seed, target,
                                                              targets if self.control is not None else None))

    def report(self, result: dict, overall: StreamMetrics, by_prompt: dict[str, StreamMetrics]) -> None:
        def total(per_task: dict[str, StreamMetrics]) -> StreamMetrics:
            out = StreamMetrics()
            for m in per_task.values():
                out = out.merged(m)
            return out

        ablations = {}
        for row in ("decoder_only", "no_transformer"):
            if self.metrics[row]:
                ablations[row] = {**total(self.metrics[row]).summary(),
                                  "by_prompt": {k: m.summary() for k, m in self.metrics[row].items()}}
        if "decoder_only" in ablations:
            ablations["decoder_only"]["prompt_accuracy"] = self.control.summary()["accuracy"] if self.control \
                else None
        elif self.guided:          # the model's own figures (streaming it twice would give the same frames)
            ablations["decoder_only"] = {
                **overall.summary(), "by_prompt": {k: m.summary() for k, m in by_prompt.items()},
                "prompt_accuracy": (result.get("prompt_control") or {}).get("accuracy"),
                "same_as": "model (a guided decoder: no refiner to take away)"}
        if self.no_transformer_fit is not None:
            ablations["no_transformer_fit"] = self.no_transformer_fit
        result["ablations"] = ablations
        result["baselines"]["conv"] = total(self.metrics["conv"]).summary()
        result["baselines"]["conv_by_prompt"] = {k: m.summary() for k, m in self.metrics["conv"].items()}
        result["conv_fit"] = self.conv_fit
        if self.metrics["no_transformer"]:
            diff = lambda a, b: {k: round(a[k] - b[k], 4) for k in ("psnr", "ssim")}  # noqa: E731
            nt = self.metrics["no_transformer"]
            result["transformer_contribution"] = {
                **diff(overall.summary(), total(nt).summary()),
                "by_prompt": {k: diff(by_prompt[k].summary(), nt[k].summary()) for k in nt if k in by_prompt}}
        result["not_computed"].update(self.not_computed)
