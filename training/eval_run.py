"""`alaya-studio eval`, the run: a flash model streamed over held-out recordings, scored against each task's
target, beside the baselines; with styles, prompt control measured (training/eval_prompt_control.py).

A *task* is what one stream is asked for and scored against:
    without --styles   one per recording: its prompt (--prompt / --prompts), scored against its own RGB
    with --styles      one per style: the style's preset, scored against that style's target
                       (training/style_targets.py: `original` = the RGB, else the reference renderer's preset)
Each task streams once per noise seed through the studio's Rollout and the renderer's own session, exactly as
live. Baselines score the same frames against the same targets: albedo passthrough and the reference renderer's
`original` (against the RGB), `per_pixel` (training/baselines.py, fitted on the training recordings, one map per
target style) and `codec` (the model's RGB codec on the target); beside them the ablations and the conv
baseline (training/ablations.py).
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from prompt_presets.resolve import resolve_prompt
from training.baselines import PerPixelFit, PerPixelMap, codec_reconstruction
from training.data import load_recording
from training.errors import TrainingError
from training.eval_frames import HeldOutRecording, open_held_out
from training.eval_regions import context_blocks
from training.eval_tasks import (BLOCK, EIGHT_WORLDS, FIT_FRAMES, SPREAD_KEYS, EvalOptions, Task, render_stream,
                                 named_training_recordings, tasks_for, training_recordings)
from training.eval_prompt_control import PARAPHRASES, StyleAccuracy, nearest_style, segment_report
from training.metrics import StreamMetrics
from training.style_targets import ORIGINAL, gbuffer_frames, style_frames, style_name

if TYPE_CHECKING:
    from renderer.base import Renderer
    from training.ablations import Ablations
    from training.codec import Codec
    from training.reference_metrics import FvdClips


def fit_per_pixel(paths: list[str], tests: list[HeldOutRecording], target_styles: list[str], size: tuple[int, int],
                  reference,
                  seed: int) -> tuple[dict[str, PerPixelMap], dict]:
    """One map per target style, fitted on `paths` at the eval size. Refuses a fit recording that is, or shares
    a frame with, a test recording."""
    test_paths = {t.path.resolve(): t.name for t in tests}
    test_frames = {d: t.name for t in tests for d in t.frame_digests()}
    fit, used = PerPixelFit(seed=seed), []
    for p in map(Path, paths):
        if p.resolve() in test_paths:
            raise TrainingError(f"{p.name} is also a test recording: a baseline fitted on the frames it is scored "
                                "on proves nothing", "--fit")
        rec = load_recording(p, *size, ORIGINAL)
        shared = [test_frames[d] for d in HeldOutRecording(p, rec, 1.0).frame_digests() if d in test_frames]
        if shared:
            raise TrainingError(f"{p.name} shares frames with test recording {shared[0]}: a baseline fitted on the "
                                "frames it is scored on proves nothing", "--fit")
        picks = np.unique(np.linspace(0, len(rec) - 1, min(FIT_FRAMES, len(rec))).round().astype(int)).tolist()
        for start in range(0, len(picks), BLOCK):
            idx = picks[start:start + BLOCK]
            gbuffer = np.stack([f.data for f in gbuffer_frames(rec, idx)])
            fit.add(gbuffer, {s: style_frames(rec, s, idx, renderer=reference) for s in target_styles})
        used.append({"recording": p.name, "frames": len(picks)})
    return fit.solve(), {"recordings": used, "pixels_per_frame": fit.pixels, "samples": fit.samples}


def _codec(o: EvalOptions) -> Codec | None:
    from training.codec import CODEC_JSON, load_codec

    root = Path(o.codec or o.weights)
    if o.codec is None and not (root / CODEC_JSON).is_file():
        return None
    return load_codec(root)


def _spread(per_seed: list[StreamMetrics]) -> dict:
    rows = [m.summary() for m in per_seed]
    return {f"{k}_std": round(float(np.std([r[k] for r in rows])), 4) for k in SPREAD_KEYS}


class Evaluation:
    def __init__(self, o: EvalOptions, renderer=None):
        """`renderer`: what is evaluated (default: the flash model of o.weights)."""
        from renderer import create_renderer

        if o.noise_seeds < 1:
            raise TrainingError(f"must be at least 1, got {o.noise_seeds}", "--noise-seeds")
        self.o = o
        o.styles = [style_name(s) for s in o.styles] if o.styles else None
        self.renderer: Renderer = renderer or create_renderer("flash", weights=o.weights, device=o.device,
                                                    unknown_prompt="presets", **o.renderer_options)
        self.reference = create_renderer("reference") if (o.baselines or o.styles) else None
        trained_on = {Path(n).resolve() for n in named_training_recordings(o.weights)}
        for p in map(Path, o.recordings):
            if p.resolve() in trained_on:
                raise TrainingError("the model was trained on this recording: score held-out ones", str(p))
        self.tests = [open_held_out(p, o.size, o.frames) for p in o.recordings]
        self.seeds = [o.seed + k for k in range(o.noise_seeds)]
        self.not_computed: dict[str, str] = {}
        self.maps: dict[str, PerPixelMap] = {}
        self.fit_info: dict | None = None
        self.codec: Codec | None = None
        if o.baselines:
            targets = sorted({t.target for test in self.tests for t in tasks_for(test.path, o)})
            h, w = self.tests[0].recording.gbuffer.shape[-2:]
            size = (w, h)
            self.maps, self.fit_info = fit_per_pixel(o.fit or training_recordings(o.weights), self.tests, targets,
                                                     size, self.reference, o.seed)
            self.codec = _codec(o)
            if self.codec is None:
                self.not_computed["codec"] = "the weights have no RGB encoder (codec.json); give --codec DIR"
        self.ablations: Ablations | None = None  # decoder_only, no_transformer and the conv baseline
        if o.baselines:
            from training.ablations import Ablations

            self.ablations = Ablations(self)

    # ---- one recording ------------------------------------------------------------------------------------

    def targets(self, test: HeldOutRecording, styles) -> dict[str, np.ndarray]:
        return {s: style_frames(test.recording, s, renderer=self.reference) for s in styles}

    def score_model(self, test: HeldOutRecording, task: Task, seed: int, targets, control):
        """One stream → (its metrics, its FVD clips or None); `control` counts which style each frame shows."""
        from timeline.schedule import Schedule

        o, metrics = self.o, StreamMetrics()
        target = targets[task.target]
        fvd = self._fvd()
        with contextlib.ExitStack() as stack:
            writer = self._side_by_side(stack, test, task) if seed == self.seeds[0] else None
            for rendered in render_stream(self.renderer, test.source(), Schedule.single(task.prompt, test.fps), seed):
                i, out = rendered.index, rendered.rgb
                metrics.update(out, target[i])
                if o.lpips is not None:
                    as_tensor = lambda im: torch.from_numpy(im).permute(2, 0, 1)[None].float() / 127.5 - 1  # noqa: E731
                    metrics.add("lpips", float(o.lpips(as_tensor(out), as_tensor(target[i])).mean()))
                if o.clip is not None:
                    metrics.add("clip_score", o.clip.score(out, resolve_prompt(task.prompt).text))
                if fvd is not None:
                    fvd.update(out, target[i])
                if control is not None:
                    control.update(task.key, out, {s: targets[s][i] for s in o.styles or ()})
                if writer is not None:
                    writer.write(np.concatenate([rendered.gbuffer.channel("albedo"), target[i], out], axis=1))
        return metrics, fvd

    def _fvd(self) -> FvdClips | None:
        from training.reference_metrics import FvdClips

        return FvdClips(self.o.i3d, self.o.fvd_clip_frames) if self.o.i3d is not None else None

    def _side_by_side(self, stack, test: HeldOutRecording, task: Task):
        if self.o.side_by_side is None:
            return None
        from media.video import Mp4Writer

        out = Path(self.o.side_by_side)
        out.mkdir(parents=True, exist_ok=True)
        name = f"{test.name}.side-by-side.mp4" if not self.o.styles else f"{test.name}.{task.key}.side-by-side.mp4"
        h, w = test.recording.gbuffer.shape[-2:]
        return stack.enter_context(Mp4Writer(out / name, 3 * w, h, test.fps))

    def score_baselines(self, test: HeldOutRecording, tasks: list[Task], targets
                        ) -> dict[str, dict[str, StreamMetrics]]:
        """{baseline: {task key: metrics}}; albedo and reference_original against the RGB only."""
        from timeline.schedule import Schedule

        out: dict[str, dict[str, StreamMetrics]] = {"albedo": {}, "reference_original": {}, "per_pixel": {},
                                                    "codec": {}}
        rgb = test.rgb()
        albedo, reference = StreamMetrics(), StreamMetrics()
        for i, frame in enumerate(test.gbuffer()):
            albedo.update(np.ascontiguousarray(frame[0]), rgb[i])
        for rendered in render_stream(self.reference, test.source(), Schedule.single(ORIGINAL, test.fps), 0):
            reference.update(rendered.rgb, rgb[rendered.index])
        out["albedo"]["*"], out["reference_original"]["*"] = albedo, reference
        for task in tasks:
            target, per_pixel = targets[task.target], StreamMetrics()
            for start in range(0, len(test), BLOCK):
                predicted = self.maps[task.target].predict(test.gbuffer(start, start + BLOCK))
                for k, frame in enumerate(predicted):
                    per_pixel.update(frame, target[start + k])
            out["per_pixel"][task.key] = per_pixel
            if self.codec is not None:
                codec = StreamMetrics()
                for i, frame in enumerate(codec_reconstruction(self.codec, target, gbuffer=test.recording.gbuffer)):
                    codec.update(frame, target[i])
                out["codec"][task.key] = codec
        return out

    # ---- prompt control beyond the styles' own streams ----------------------------------------------------

    def paraphrases(self) -> dict:
        from timeline.schedule import Schedule

        styles = self.o.styles or []                 # (prompt control runs with --styles only)
        items: list[dict[str, Any]] = []
        for text, style in PARAPHRASES.items():
            if style not in styles:
                continue
            hits = frames = 0
            for test in self.tests:
                n = min(len(test), self.o.paraphrase_frames)
                targets = {s: style_frames(test.recording, s, range(n), renderer=self.reference)
                           for s in styles}
                for r in render_stream(self.renderer, test.source(), Schedule.single(text, test.fps), self.seeds[0],
                                       n):
                    hits += nearest_style(r.rgb, {s: t[r.index] for s, t in targets.items()}) == style
                    frames += 1
            items.append({"text": text, "style": style, "frames": frames, "accuracy": round(hits / frames, 4)})
        total = sum(i["frames"] for i in items)
        accuracy = sum(i["accuracy"] * i["frames"] for i in items) / total if total else None
        return {"accuracy": None if accuracy is None else round(accuracy, 4), "items": items}

    def eight_worlds(self) -> dict:
        from timeline.schedule.io import load_builtin

        schedule = load_builtin(EIGHT_WORLDS)
        length = schedule.length
        styles = [preset for seg in schedule.segments if (preset := seg.prompts[0].resolve().preset) is not None]
        if length is None or len(styles) != len(schedule.segments):     # as shipped: fixed, one preset each
            raise TrainingError("needs a fixed length and one preset per segment", f"schedule {EIGHT_WORLDS}")
        n = min(length, self.o.rollout_frames or length)
        test = self.tests[0].looped(n)
        rgb = np.stack([r.rgb for r in render_stream(self.renderer, test.source(), schedule, self.seeds[0])])
        hits = []
        for start in range(0, n, BLOCK):
            idx = list(range(start, min(start + BLOCK, n)))
            targets = {s: style_frames(test.recording, s, idx, renderer=self.reference) for s in styles}
            for k, i in enumerate(idx):
                asked = styles[schedule.segment_index_at(i)]
                hits.append(nearest_style(rgb[i], {s: t[k] for s, t in targets.items()}) == asked)
        report = segment_report(list(schedule.boundaries()), styles, hits, rgb, test.gbuffer())
        return {"recording": test.name, "schedule": EIGHT_WORLDS, **report}

    # ---- the whole run ------------------------------------------------------------------------------------

    def run(self) -> dict:
        o = self.o
        control = StyleAccuracy() if o.styles and len(o.styles) >= 2 else None
        rows, overall = [], StreamMetrics()
        by_prompt: dict[str, StreamMetrics] = {}
        per_seed = {s: StreamMetrics() for s in self.seeds}
        fvd_overall = self._fvd()
        fvd_by_prompt: dict[str, FvdClips] = {}
        base: dict[str, dict[str, StreamMetrics]] = {}
        for test in self.tests:
            tasks = tasks_for(test.path, o)
            targets = self.targets(test, sorted({t.target for t in tasks} | set(o.styles or ())))
            for task in tasks:
                metrics, fvd = StreamMetrics(), self._fvd()
                for seed in self.seeds:
                    m, clips = self.score_model(test, task, seed, targets, control)
                    per_seed[seed] = per_seed[seed].merged(m)
                    metrics = metrics.merged(m)
                    fvd = fvd.merged(clips) if fvd is not None else None
                if fvd is not None:
                    fvd_overall = fvd_overall.merged(fvd) if fvd_overall is not None else fvd
                    fvd_by_prompt[task.key] = fvd_by_prompt[task.key].merged(fvd) if task.key in fvd_by_prompt \
                        else fvd
                rows.append({"recording": test.name, "prompt": task.key, **metrics.summary(),
                             **(fvd.summary() if fvd is not None else {})})
                by_prompt[task.key] = by_prompt.get(task.key, StreamMetrics()).merged(metrics)
                overall = overall.merged(metrics)
            if o.baselines:
                for name, per_task in self.score_baselines(test, tasks, targets).items():
                    for key, m in per_task.items():
                        base.setdefault(name, {})[key] = base.get(name, {}).get(key, StreamMetrics()).merged(m)
                if self.ablations is not None:          # (always, with baselines)
                    self.ablations.score(test, tasks, targets)
        result: dict[str, Any] = {
            "weights": o.weights, "renderer": self.renderer.describe(),
            "held_out_recordings": [t.name for t in self.tests], "styles": o.styles, "recordings": rows,
            "per_prompt": [{"prompt": k, **m.summary(),
                            **(fvd_by_prompt[k].summary() if k in fvd_by_prompt else {})}
                           for k, m in by_prompt.items()],
            "by_prompt": {k: m.summary() for k, m in by_prompt.items()},
            "overall": {**overall.summary(), **(fvd_overall.summary() if fvd_overall is not None else {}),
                        **(_spread(list(per_seed.values())) if len(self.seeds) > 1 else {})},
            "noise_seeds": {"seeds": self.seeds,
                            "per_seed": [{"seed": s, **{k: m.summary()[k] for k in SPREAD_KEYS}}
                                         for s, m in per_seed.items()]},
            "baselines": self._baselines(base), "not_computed": dict(self.not_computed),
        }
        extra = None                     # the ablations' and the conv baseline's rows, scored on regions too
        if self.ablations is not None:
            from training.ablations import region_rows
            extra = region_rows(self)
        result.update(context_blocks(self, result["not_computed"], extra))     # regions and warp_error
        if self.fit_info is not None:
            result["per_pixel_fit"] = self.fit_info
        if control is not None:
            result["prompt_control"] = {**control.summary(),
                                        "paraphrases": self.paraphrases() if o.paraphrases else None,
                                        "eight_worlds": self.eight_worlds() if o.eight_worlds else None}
        else:                                       # it needs --styles with two or more styles
            result["prompt_control"] = None
        if self.ablations is not None:              # after prompt control: a guided model's decoder_only reads it
            self.ablations.report(result, overall, by_prompt)
        return result

    def _baselines(self, base: dict[str, dict[str, StreamMetrics]]) -> dict:
        out = {}
        for name, per_task in base.items():
            if not per_task:
                continue
            total = StreamMetrics()
            for m in per_task.values():
                total = total.merged(m)
            out[name] = total.summary()
            if name in ("per_pixel", "codec"):
                out[f"{name}_by_prompt"] = {k: m.summary() for k, m in per_task.items()}
        return out


def codec_ceiling(o: EvalOptions) -> dict:
    """`alaya-studio eval codec`: the RGB codec alone on each task's target (no model is run)."""
    codec = _codec(o)
    if codec is None:
        raise TrainingError("has no RGB encoder (codec.json): give --codec DIR", str(o.weights))
    from renderer import create_renderer

    o.styles = [style_name(s) for s in o.styles] if o.styles else None
    reference = create_renderer("reference") if o.styles else None
    rows, overall = [], StreamMetrics()
    by_prompt: dict[str, StreamMetrics] = {}
    for test in (open_held_out(p, o.size, o.frames) for p in o.recordings):
        for task in tasks_for(test.path, o):
            target = style_frames(test.recording, task.target, renderer=reference)
            m = StreamMetrics()
            for i, frame in enumerate(codec_reconstruction(codec, target, gbuffer=test.recording.gbuffer)):
                m.update(frame, target[i])
            rows.append({"recording": test.name, "prompt": task.key, **m.summary()})
            by_prompt[task.key] = by_prompt.get(task.key, StreamMetrics()).merged(m)
            overall = overall.merged(m)
    return {"codec": o.codec or o.weights, "styles": o.styles, "recordings": rows,
            "by_prompt": {k: m.summary() for k, m in by_prompt.items()}, "overall": overall.summary()}
