"""`alaya-studio eval WEIGHTS_DIR RECORDING... [--baselines [--fit REC...]] [--styles LIST] [--noise-seeds N]`
`alaya-studio eval codec WEIGHTS_DIR RECORDING... [--styles LIST]` (the codec's own reconstruction alone)
`alaya-studio eval seeds RESULT.json... --seeds 0,1,2 --json OUT` (one recipe over training seeds: mean and range)

Streams a flash model over held-out paired recordings exactly as live (the studio's Rollout and the renderer's
own session, chunk by chunk with its history) and scores the output against each task's target: PSNR, SSIM
and temporal flicker, per recording, per prompt and overall (training/eval_run.py). Without --styles a
recording's target is its own RGB; with --styles each style is streamed and scored against its target (the
reference renderer's preset over the same G-buffer; `original` = the RGB), and prompt control is measured:
which style each frame shows, held-out paraphrases and the eight-worlds rollout (training/eval_prompt_control.py).
`--baselines` scores on the same frames: albedo passthrough, the reference renderer's `original`, `per_pixel`
(a quadratic per-pixel map fitted on the training recordings, never on a test one) and `codec` (the model's RGB
codec on the target: a latent model's ceiling), with the ablations `decoder_only` (refiner off) and
`no_transformer` (zero latents, refiner refitted; a guided model's guide refitted on them first, within
--ablation-guide-minutes) and `conv` (a G-buffer convnet fitted within --conv-minutes;
training/ablations.py). `--noise-seeds N` streams every task with N noise seeds (mean
and spread). `--renderer-option KEY=VALUE` runs the model with a live session's settings (num_steps=2). LPIPS,
CLIP score and FVD are computed when local weights for them are given (`--lpips-weights`, `--clip-weights`,
`--i3d-weights`; training/reference_metrics.py), otherwise listed as not computed: nothing is ever downloaded.
`--side-by-side` writes an MP4 per recording (and style): G-buffer albedo | target | output.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from gbuffer.size import Size
from renderer import check_size
from studio.commands._args import ArgumentError

BASELINES = ("albedo", "reference_original", "per_pixel", "codec")


def register(sub) -> None:
    p = sub.add_parser("eval", help="score a flash model on held-out paired recordings (PSNR, SSIM, flicker)",
                       add_help=False, description=__doc__.split("\n\n")[0])
    p.add_argument("argv", nargs=argparse.REMAINDER)
    p.set_defaults(func=run)


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("weights", metavar="WEIGHTS_DIR", help="flash weights directory (official layout)")
    p.add_argument("recordings", nargs="+", metavar="RECORDING", help="held-out paired recordings (with RGB)")
    p.add_argument("--json", help="write the results as JSON here")
    p.add_argument("--markdown", help="write the results table as Markdown here")
    p.add_argument("--styles", help="comma-separated presets (original = the recording's RGB), or 'all'")
    p.add_argument("--prompt", default="original", help="without --styles: prompt or preset for every recording")
    p.add_argument("--prompts", help='JSON {"recording file name" or "*": prompt}, as for train')
    p.add_argument("--size", help="render size WxH (default: the recording's)")
    p.add_argument("--frames", type=int, help="score at most this many frames per recording")
    p.add_argument("--codec", metavar="DIR", help="RGB codec for the codec baseline (default: the weights' own)")
    p.add_argument("--device", help="torch device (default: cuda when available)")
    p.add_argument("--threads", type=int, help="CPU threads for torch")
    p.add_argument("--seed", type=int, default=0)


def eval_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="alaya-studio eval", description=__doc__.split("\n\n")[1])
    _common(p)
    p.add_argument("--side-by-side", nargs="?", const="", metavar="DIR",
                   help="write <recording>[.<style>].side-by-side.mp4 (albedo | target | output) into DIR "
                        "(default: beside --json, else the current directory)")
    p.add_argument("--renderer-option", action="append", metavar="KEY=VALUE",
                   help="flash setting for the model under test, repeatable, as serve takes it: e.g. the live "
                        "settings chunk_size=4 num_steps=2 (the JSON's renderer block says what ran)")
    p.add_argument("--baselines", action="store_true",
                   help="also score albedo passthrough, reference/original, per_pixel and codec")
    p.add_argument("--fit", nargs="+", metavar="RECORDING",
                   help="training recordings the per_pixel baseline is fitted on (default: the weights' own, "
                        "from train_settings.json); never a test recording")
    p.add_argument("--conv-minutes", type=float, default=10.0,
                   help="with --baselines: the conv baseline's fitting budget in minutes of wall time (10)")
    p.add_argument("--ablation-guide-minutes", type=float,
                   help="with --baselines, a guided model: the no_transformer ablation's guide refit budget in "
                   "minutes (default: the model's own refit's, from guide_fit.json)")
    p.add_argument("--noise-seeds", type=int, default=1, help="stream each task with N noise seeds (default 1)")
    p.add_argument("--no-paraphrases", action="store_true", help="with --styles: skip the held-out paraphrases")
    p.add_argument("--paraphrase-frames", type=int, default=32, help="frames per paraphrase and recording (32)")
    p.add_argument("--no-eight-worlds", action="store_true", help="with --styles: skip the eight-worlds rollout")
    p.add_argument("--rollout-frames", type=int, help="frames of the eight-worlds rollout (default all 637)")
    p.add_argument("--lpips-weights", help="local TorchScript perceptual distance f(x, y) on [-1, 1] images")
    p.add_argument("--clip-weights", metavar="DIR",
                   help="local Hugging Face CLIP directory: CLIP score of each frame against its prompt")
    p.add_argument("--i3d-weights", metavar="FILE",
                   help="local TorchScript I3D, videos (B, 3, T, 224, 224) in [-1, 1] -> features (B, D): FVD")
    p.add_argument("--fvd-clip-frames", type=int, default=16, help="frames per FVD clip (default 16)")
    return p


def codec_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="alaya-studio eval codec", description="The RGB codec's own "
                                "reconstruction (encode and decode) of each target: a latent model's ceiling.")
    _common(p)
    return p


def seeds_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="alaya-studio eval seeds", description="Fold the eval results of one recipe "
                                "trained with several seeds into one: each seed under training_seeds, the mean of "
                                "every figure at the top, [min, max] under range (training/eval_seeds.py).")
    p.add_argument("results", nargs="+", metavar="RESULT.json", help="`alaya-studio eval --json` of each seed")
    p.add_argument("--seeds", required=True, help="the training seed of each result, in order: e.g. 0,1,2")
    p.add_argument("--json", help="write the folded result as JSON here")
    p.add_argument("--markdown", help="write the summary table as Markdown here")
    return p


def run(args) -> int:
    argv = list(args.argv)
    if argv[:1] == ["codec"]:
        return run_codec(codec_parser().parse_args(argv[1:]))
    if argv[:1] == ["seeds"]:
        return run_seeds(seeds_parser().parse_args(argv[1:]))
    return run_eval(eval_parser().parse_args(argv))


def _options(a):
    from prompt_presets.presets import find_preset, preset_names
    from training.data import DEFAULT_PROMPT, read_prompt_file
    from training.eval_run import EvalOptions

    for flag, value in (("--frames", a.frames), ("--threads", a.threads)):
        if value is not None and value < 1:
            raise ArgumentError(f"must be at least 1, got {value}", flag)
    if a.threads is not None:
        import torch

        torch.set_num_threads(a.threads)
    prompts = read_prompt_file(a.prompts)
    if a.prompt != DEFAULT_PROMPT:
        prompts.setdefault("*", a.prompt)
    styles = None
    if a.styles is not None:
        styles = preset_names() if a.styles.strip() == "all" else [s.strip() for s in a.styles.split(",") if s.strip()]
        if not styles:
            raise ArgumentError("give preset names separated by commas, or 'all'", "--styles")
        unknown = [s for s in styles if find_preset(s) is None]
        if unknown:
            raise ArgumentError(f"unknown preset {unknown[0]!r}; known: {', '.join(preset_names())}", "--styles")
    size = tuple(check_size("flash", *Size.parse(a.size, "--size"))) if a.size else None
    return EvalOptions(weights=a.weights, recordings=a.recordings, styles=styles, prompts=prompts, size=size,
                       frames=a.frames, codec=a.codec, seed=a.seed, device=a.device)


def _renderer_options(items: list[str] | None) -> dict:
    from studio.commands._args import check_renderer_options, parse_renderer_options

    options = parse_renderer_options(items)
    for key in ("weights", "device", "unknown_prompt"):
        if key in options:
            raise ArgumentError(f"{key} is eval's own (WEIGHTS_DIR, --device; free text falls back to the "
                                "nearest presets)", "--renderer-option")
    check_renderer_options("flash", options)
    return options


def _write(a, result: dict, table: str) -> None:
    if a.json:
        Path(a.json).write_text(json.dumps(result, indent=2))
    if a.markdown:
        Path(a.markdown).write_text(table)
    print(table)


def run_eval(a) -> int:
    from training.codec import load_perceptual
    from training.eval_run import Evaluation
    from training.reference_metrics import ClipScorer, I3dFeatures

    if a.fvd_clip_frames < 2:
        raise ArgumentError(f"must be at least 2, got {a.fvd_clip_frames}", "--fvd-clip-frames")
    for flag, value in (("--noise-seeds", a.noise_seeds), ("--paraphrase-frames", a.paraphrase_frames),
                        ("--rollout-frames", a.rollout_frames)):
        if value is not None and value < 1:
            raise ArgumentError(f"must be at least 1, got {value}", flag)
    o = _options(a)
    o.renderer_options = _renderer_options(a.renderer_option)
    for flag, minutes in (("--conv-minutes", a.conv_minutes), ("--ablation-guide-minutes", a.ablation_guide_minutes)):
        if minutes is not None and not minutes > 0:
            raise ArgumentError(f"must be a positive number of minutes, got {minutes}", flag)
    o.baselines, o.fit, o.noise_seeds, o.conv_minutes = a.baselines, a.fit, a.noise_seeds, a.conv_minutes
    o.ablation_guide_minutes = a.ablation_guide_minutes
    o.paraphrases, o.paraphrase_frames = not a.no_paraphrases, a.paraphrase_frames
    o.eight_worlds, o.rollout_frames = not a.no_eight_worlds, a.rollout_frames
    o.lpips = load_perceptual(a.lpips_weights)
    o.clip = ClipScorer(a.clip_weights) if a.clip_weights else None
    o.i3d = I3dFeatures(a.i3d_weights) if a.i3d_weights else None
    o.fvd_clip_frames = a.fvd_clip_frames
    if a.side_by_side is not None:
        o.side_by_side = Path(a.side_by_side or (Path(a.json).parent if a.json else "."))
    result = Evaluation(o).run()
    result["not_computed"].update({name: f"no {flag}" for name, flag, given in (
        ("lpips", "--lpips-weights", o.lpips), ("clip_score", "--clip-weights", o.clip),
        ("fvd", "--i3d-weights", o.i3d)) if given is None})
    _write(a, result, markdown_table(result))
    return 0


def run_codec(a) -> int:
    from training.eval_run import codec_ceiling

    result = codec_ceiling(_options(a))
    _write(a, result, markdown_table({"recordings": result["recordings"], "per_prompt": [],
                                      "overall": result["overall"], "baselines": {}, "not_computed": {}}))
    return 0


def run_seeds(a) -> int:
    from training.eval_seeds import merge_seed_runs

    try:
        seeds = [int(s) for s in a.seeds.split(",")]
    except ValueError:
        raise ArgumentError(f"{a.seeds!r} is not a comma-separated list of integers (for example 0,1,2)",
                            "--seeds") from None
    runs = []
    for name in a.results:
        try:
            runs.append(json.loads(Path(name).read_text()))
        except OSError as e:
            raise ArgumentError(f"cannot be read: {e.strerror}", name) from None
        except ValueError as e:
            raise ArgumentError(f"is not JSON: {e}", name) from None
    merged = merge_seed_runs(runs, seeds, [Path(n).name for n in a.results])
    _write(a, merged, seeds_table(merged))
    return 0


def seeds_table(merged: dict) -> str:
    """Per seed and their mean [range]: the figures issue 46's goals are stated in."""
    rows = [("overall", ("overall",)), ("baselines.per_pixel", ("baselines", "per_pixel")),
            ("baselines.conv", ("baselines", "conv")), ("ablations.no_transformer", ("ablations", "no_transformer")),
            ("transformer_contribution", ("transformer_contribution",)),
            ("regions.shadow.model", ("regions", "shadow", "model")),
            ("regions.shadow.per_pixel", ("regions", "shadow", "per_pixel"))]

    def at(tree: dict, path: tuple[str, ...]) -> dict:
        node: object = tree
        for key in path:
            node = node.get(key) if isinstance(node, dict) else None
        return node if isinstance(node, dict) else {}

    seeds = merged["training_seeds"]
    lines = ["| psnr / ssim | " + " | ".join(f"seed {e['seed']}" for e in seeds) + " | mean [range] |",
             "|" + "---|" * (len(seeds) + 2)]
    for label, path in rows:
        mean, spread = at(merged, path), at(merged["range"], path)
        if "psnr" not in mean:
            continue
        cells = [f"{at(e, path).get('psnr')} / {at(e, path).get('ssim')}" for e in seeds]
        lines.append(f"| {label} | " + " | ".join(cells) + f" | {mean['psnr']} [{spread['psnr'][0]}, "
                     f"{spread['psnr'][1]}] / {mean.get('ssim')} |")
    accuracy = (merged.get("prompt_control") or {}).get("accuracy")
    if accuracy is not None:
        lines.append(f"\nPrompt accuracy: mean {accuracy}, range {merged['range']['prompt_control']['accuracy']}")
    return "\n".join(lines) + "\n"


def markdown_table(result: dict) -> str:
    cols: tuple[str, ...] = ("frames", "psnr", "ssim", "flicker", "flicker_ratio")
    cols += tuple(c for c in ("lpips", "clip_score", "fvd") if c in result["overall"])
    lines = ["| what | " + " | ".join(cols) + " |", "|" + "---|" * (len(cols) + 1)]

    def row(name: str, m: dict) -> None:
        lines.append(f"| {name} | " + " | ".join("—" if m.get(c) is None else str(m[c]) for c in cols) + " |")

    for r in result["recordings"]:
        row(r["recording"] + (f", {r['prompt'][:30]}" if result.get("styles") else ""), r)
    for p in result["per_prompt"]:
        row(f"prompt: {p['prompt'][:40]}", p)
    row("**overall**", result["overall"])
    for name, m in result["baselines"].items():
        if "frames" in m:                                   # not the *_by_prompt tables
            row(f"baseline: {name}", m)
    for name in ("per_pixel", "codec", "conv"):
        for key, m in result["baselines"].get(f"{name}_by_prompt", {}).items():
            row(f"baseline: {name}, {key[:30]}", m)
    for name, m in result.get("ablations", {}).items():
        if "psnr" in m:                                     # not the fit report
            row(f"ablation: {name}", m)
    gain = result.get("transformer_contribution")
    if gain:
        lines.append("")
        per_task = ", ".join(f"{k[:30]} {v['psnr']} dB" for k, v in gain["by_prompt"].items())
        lines.append(f"What the transformer adds (overall - no_transformer): {gain['psnr']} dB PSNR, "
                     f"{gain['ssim']} SSIM; {per_task}")
    control = result.get("prompt_control")
    if control:
        lines.append("")
        lines.append(f"Prompt control: accuracy {control['accuracy']} over {control['frames']} frames; "
                     + ", ".join(f"{k} {v}" for k, v in control["by_prompt"].items()))
        if control.get("paraphrases"):
            lines.append(f"Held-out paraphrases: accuracy {control['paraphrases']['accuracy']}")
        worlds = control.get("eight_worlds")
        if worlds:
            lines.append(f"Eight worlds ({worlds['frames']} frames): accuracy {worlds['accuracy']}, structure "
                         f"first {worlds['structure_first']} / last {worlds['structure_last']}; per segment "
                         + ", ".join(f"{s['style']} {s['accuracy']} (settles {s['settle_frames']})"
                                     for s in worlds["segments"]))
    missing = ", ".join(f"{k} ({v})" for k, v in result["not_computed"].items())
    return "\n".join(lines) + (f"\n\nNot computed: {missing}\n" if missing else "\n")
