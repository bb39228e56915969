"""`alaya-studio eval WEIGHTS_DIR RECORDING... [--json FILE] [--markdown FILE] [--side-by-side]`

Streams a flash model over held-out paired recordings exactly as live (the studio's Rollout and the renderer's
own session, chunk by chunk with its history) and scores the output against each recording's RGB: PSNR, SSIM
and temporal flicker, per recording, per prompt and overall; optionally the two baselines a trained model must
beat (albedo passthrough; the reference renderer's `original` style) on the same frames. LPIPS, CLIP score and
FVD are computed when local weights for them are given (`--lpips-weights`, `--clip-weights`, `--i3d-weights`;
training/reference_metrics.py), otherwise listed as not computed: nothing is ever downloaded.
`--side-by-side` writes an MP4 per recording: G-buffer albedo | truth | output.
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

from gbuffer.size import Size
from renderer import check_size
from studio.commands._args import ArgumentError

BASELINES = ("albedo", "reference_original")


def register(sub) -> None:
    p = sub.add_parser("eval", help="score a flash model on held-out paired recordings (PSNR, SSIM, flicker)",
                       description=__doc__.split("\n\n")[0])
    p.add_argument("weights", metavar="WEIGHTS_DIR", help="flash weights directory (official layout)")
    p.add_argument("recordings", nargs="+", metavar="RECORDING", help="paired recordings (with RGB)")
    p.add_argument("--json", help="write the results as JSON here")
    p.add_argument("--markdown", help="write the results table as Markdown here")
    p.add_argument("--side-by-side", nargs="?", const="", metavar="DIR",
                   help="write <recording>.side-by-side.mp4 (albedo | truth | output) into DIR "
                        "(default: beside --json, else the current directory)")
    p.add_argument("--prompt", default="original", help="prompt or preset for every recording (default original)")
    p.add_argument("--prompts", help='JSON {"recording file name" or "*": prompt}, as for train')
    p.add_argument("--size", help="render size WxH (default: the recording's)")
    p.add_argument("--frames", type=int, help="score at most this many frames per recording")
    p.add_argument("--baselines", action="store_true", help="also score albedo passthrough and reference/original")
    p.add_argument("--device", help="torch device (default: cuda when available)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--lpips-weights", help="local TorchScript perceptual distance f(x, y) on [-1, 1] images")
    p.add_argument("--clip-weights", metavar="DIR",
                   help="local Hugging Face CLIP directory: CLIP score of each frame against its prompt")
    p.add_argument("--i3d-weights", metavar="FILE",
                   help="local TorchScript I3D, videos (B, 3, T, 224, 224) in [-1, 1] -> features (B, D): FVD")
    p.add_argument("--fvd-clip-frames", type=int, default=16, help="frames per FVD clip (default 16)")
    p.set_defaults(func=run)


def _resize(image, size):
    from PIL import Image

    w, h = size
    if image.shape[:2] == (h, w):
        return image
    import numpy as np

    return np.asarray(Image.fromarray(image).resize((w, h), Image.BILINEAR))


def score_stream(source, session, schedule, limit, on_frame) -> None:
    """Run the rollout (live session code) and hand each rendered frame to on_frame(rendered)."""
    from studio.rollout import Rollout

    source.seek(0)
    rollout = Rollout(source, schedule, session)
    done = 0
    while limit is None or done < limit:
        chunk = rollout.next_chunk()
        if not chunk:
            break
        for rendered in chunk[: None if limit is None else limit - done]:
            on_frame(rendered)
            done += 1
    session.close()


def run(args) -> int:
    import numpy as np
    import torch

    from gbuffer.formats import open_sequence
    from renderer import create_renderer
    from studio.schedule import Schedule
    from training.codec import load_perceptual
    from training.data import DEFAULT_PROMPT, prompt_for, read_prompt_file
    from training.errors import TrainingError
    from training.metrics import StreamMetrics
    from training.reference_metrics import ClipScorer, FvdClips, I3dFeatures

    if args.frames is not None and args.frames < 1:
        raise ArgumentError(f"must be at least 1, got {args.frames}", "--frames")
    if args.fvd_clip_frames < 2:
        raise ArgumentError(f"must be at least 2, got {args.fvd_clip_frames}", "--fvd-clip-frames")
    prompts = read_prompt_file(args.prompts)
    if args.prompt != DEFAULT_PROMPT:
        prompts.setdefault("*", args.prompt)
    lpips = load_perceptual(args.lpips_weights)
    clip = ClipScorer(args.clip_weights) if args.clip_weights else None
    i3d = I3dFeatures(args.i3d_weights) if args.i3d_weights else None
    renderer = create_renderer("flash", weights=args.weights, device=args.device, unknown_prompt="presets")
    reference = create_renderer("reference") if args.baselines else None
    out_dir = Path(args.side_by_side or (Path(args.json).parent if args.json else ".")) \
        if args.side_by_side is not None else None

    rows, by_prompt, overall = [], {}, StreamMetrics()
    fvd_by_prompt: dict[str, FvdClips] = {}
    fvd_overall = FvdClips(i3d, args.fvd_clip_frames) if i3d else None
    baselines = {name: StreamMetrics() for name in BASELINES} if reference else {}
    for path in map(Path, args.recordings):
        source = open_sequence(path)
        if not getattr(source, "paired", False):
            source.close()
            raise TrainingError("has no RGB stream to score against (record it with --rgb)", str(path))
        size = (tuple(check_size("flash", *Size.parse(args.size, "--size"))) if args.size
                else (source.width, source.height))
        prompt_text = prompt_for(path, prompts)
        schedule = Schedule.single(prompt_text)
        metrics = StreamMetrics()
        fvd = FvdClips(i3d, args.fvd_clip_frames) if i3d else None
        with contextlib.ExitStack() as stack:
            stack.callback(source.close)
            writer = None
            if out_dir is not None:
                from studio.video import Mp4Writer

                out_dir.mkdir(parents=True, exist_ok=True)
                writer = stack.enter_context(Mp4Writer(out_dir / f"{path.name}.side-by-side.mp4", 3 * size[0],
                                                       size[1], source.fps))

            def model_frame(rendered):
                truth = _resize(rendered.gbuffer.rgb, size)
                metrics.update(rendered.rgb, truth)
                if lpips is not None:
                    as_tensor = lambda im: torch.from_numpy(im).permute(2, 0, 1)[None].float() / 127.5 - 1  # noqa: E731
                    metrics.add("lpips", float(lpips(as_tensor(rendered.rgb), as_tensor(truth)).mean()))
                if clip is not None:
                    metrics.add("clip_score", clip.score(rendered.rgb, prompt_text))
                if fvd is not None:
                    fvd.update(rendered.rgb, truth)
                if writer is not None:
                    albedo = _resize(rendered.gbuffer.channel("albedo"), size)
                    writer.write(np.concatenate([albedo, truth, rendered.rgb], axis=1))

            def baseline_frame(rendered):
                truth = _resize(rendered.gbuffer.rgb, size)
                baselines["albedo"].update(_resize(rendered.gbuffer.channel("albedo"), size), truth)
                baselines["reference_original"].update(rendered.rgb, truth)

            score_stream(source, renderer.open_session(*size, seed=args.seed), schedule, args.frames, model_frame)
            if reference is not None:
                score_stream(source, reference.open_session(*size, seed=args.seed), Schedule.single("original"),
                             args.frames, baseline_frame)
        rows.append({"recording": path.name, "prompt": prompt_text, **metrics.summary(),
                     **(fvd.summary() if fvd else {})})
        by_prompt[prompt_text] = by_prompt.get(prompt_text, StreamMetrics()).merged(metrics)
        overall = overall.merged(metrics)
        if fvd is not None:
            fvd_by_prompt[prompt_text] = fvd_by_prompt[prompt_text].merged(fvd) if prompt_text in fvd_by_prompt \
                else fvd
            fvd_overall = fvd_overall.merged(fvd)

    not_computed = {name: f"no {flag}" for name, flag, given in (
        ("lpips", "--lpips-weights", lpips), ("clip_score", "--clip-weights", clip), ("fvd", "--i3d-weights", i3d))
        if given is None}
    fvd_of = lambda p: fvd_by_prompt[p].summary() if p in fvd_by_prompt else {}   # noqa: E731
    result = {"weights": args.weights, "renderer": renderer.describe(), "recordings": rows,
              "per_prompt": [{"prompt": p, **m.summary(), **fvd_of(p)} for p, m in by_prompt.items()],
              "overall": {**overall.summary(), **(fvd_overall.summary() if fvd_overall else {})},
              "baselines": {k: m.summary() for k, m in baselines.items()}, "not_computed": not_computed}
    table = markdown_table(result)
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2))
    if args.markdown:
        Path(args.markdown).write_text(table)
    print(table)
    return 0


def markdown_table(result: dict) -> str:
    cols = ("frames", "psnr", "ssim", "flicker", "flicker_ratio")
    cols += tuple(c for c in ("lpips", "clip_score", "fvd") if c in result["overall"])
    lines = ["| what | " + " | ".join(cols) + " |", "|" + "---|" * (len(cols) + 1)]

    def row(name: str, m: dict) -> None:
        lines.append(f"| {name} | " + " | ".join("—" if m.get(c) is None else str(m[c]) for c in cols) + " |")

    for r in result["recordings"]:
        row(f"{r['recording']}", r)
    for p in result["per_prompt"]:
        row(f"prompt: {p['prompt'][:40]}", p)
    row("**overall**", result["overall"])
    for name, m in result["baselines"].items():
        row(f"baseline: {name}", m)
    missing = ", ".join(f"{k} ({v})" for k, v in result["not_computed"].items())
    return "\n".join(lines) + (f"\n\nNot computed: {missing}\n" if missing else "\n")
