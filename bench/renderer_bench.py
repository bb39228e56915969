"""Renderer throughput by stage, for each available backend at 416x224 and 832x448, beside the report's ablation.

    python -m bench.renderer_bench [--backends reference flash] [--sizes 416x224 832x448]
                                   [--frames 48] [--threads 1] [--flash-weights DIR] [--device cpu]
                                   [--json out.json]

Backends: `reference` (the CPU style shader) and `flash` (AlayaRenderer-Flash). Without --flash-weights, flash
runs a tiny random model written by `alaya-studio flash init-random DIR --config tiny` into a temporary folder
(the official layout, so the real loading code runs); its speed says what the pipeline costs around the model,
not what the 1.3B model does. With --flash-weights and --device cuda, the full model runs on a GPU. A backend
that cannot be built here (flash not importable, no weights) is skipped with its reason.

Frames are the synthetic G-buffer scene, made before timing; the prompt switches among the report's eight
styles every 5 chunks, as in its demo; the first --warmup chunks are not timed. FPS = frames / seconds of
rendering, chunk by chunk as a live session streams them; stage columns are milliseconds per frame (the chunk's stage
time / chunk length).
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import torch

from bench.harness import machine, parser, size, synthetic_frames, timed_chunks, write_json
from prompt_presets import REPORT_STYLES, conditioning_for
from renderer import create_renderer

# AlayaRenderer-Flash technical report (arXiv 2607.18703), ablation on one H200.
REPORT_ABLATION = (("original AlayaRenderer (50 steps, 21-frame window)", 0.56),
                   ("+ streaming (autoregressive chunks)", 1.53),
                   ("+ 4-step distillation", 6.30),
                   ("+ tiny codecs (AlayaRenderer-Flash)", 31.54))


def build_backend(name: str, args, workdir: Path):
    """(renderer, label) or (None, reason it was skipped)."""
    device = {"device": args.device} if args.device else {}
    if name == "reference":
        return create_renderer("reference", **device), "reference"
    if name != "flash":
        return None, f"unknown backend {name!r}"
    try:
        import renderer.flash  # noqa: F401
    except Exception as exc:  # noqa: BLE001 - any import failure means: not available in this checkout
        return None, f"renderer.flash does not import: {type(exc).__name__}: {exc}"
    weights, label = args.flash_weights, "flash (weights)"
    try:
        if weights is None:
            from studio.cli import main as cli

            weights, label = workdir / "flash-tiny", "flash tiny (random)"
            if cli(["flash", "init-random", str(weights), "--config", "tiny"]) != 0:
                return None, "alaya-studio flash init-random failed"
        return create_renderer("flash", weights=str(weights), **device), label
    except Exception as exc:  # noqa: BLE001 - reported, and the other backends still run
        return None, f"flash could not be built: {type(exc).__name__}: {exc}".splitlines()[0]


def measure(renderer, width: int, height: int, frames: int, warmup: int) -> dict:
    chunk = renderer.chunk_size
    gbuffers = synthetic_frames(frames + warmup * chunk, width, height)
    with renderer.open_session(width, height, seed=0) as session:
        chunks, peak = timed_chunks(session, gbuffers, lambda k: conditioning_for(
            REPORT_STYLES[(k // 5) % len(REPORT_STYLES)]), warmup)
    timed_frames, seconds = sum(c.frames for c in chunks), sum(c.seconds for c in chunks)
    stages: dict[str, list[float]] = {}
    for c in chunks:
        for stage, ms in c.timings_ms.items():
            stages.setdefault(stage, []).append(ms / c.frames)
    return {"size": f"{width}x{height}", "chunk_size": chunk, "frames": timed_frames,
            "fps": timed_frames / seconds, "ms_per_frame": 1e3 * seconds / timed_frames,
            "stage_ms_per_frame": {s: float(np.median(v)) for s, v in stages.items()},
            "peak_memory_mib": round(peak / 2**20, 1) if peak else None}


def main() -> None:
    ap = parser(__doc__)
    ap.add_argument("--backends", nargs="+", default=["reference", "flash"])
    ap.add_argument("--sizes", nargs="+", default=["416x224", "832x448"])
    ap.add_argument("--frames", type=int, default=48, help="timed frames per backend and size")
    ap.add_argument("--warmup", type=int, default=2, help="untimed chunks first")
    ap.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    ap.add_argument("--device", default=None, help="torch device for every backend (default: each one's own)")
    ap.add_argument("--flash-weights", type=Path, default=None, help="a flash weights directory (default: tiny random)")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)

    results, skipped = [], {}
    with tempfile.TemporaryDirectory() as tmp:
        print(f"{'backend':>22} {'size':>9} {'chunk':>5} {'FPS':>7} {'ms/frame':>9}  stages (ms/frame)")
        for name in args.backends:
            renderer, label = build_backend(name, args, Path(tmp))
            if renderer is None:
                skipped[name] = label
                print(f"{name:>22}  skipped: {label}", flush=True)
                continue
            for text in args.sizes:
                r = {"backend": label, **measure(renderer, *size(text), args.frames, args.warmup)}
                results.append(r)
                stages = "  ".join(f"{s} {ms:.1f}" for s, ms in r["stage_ms_per_frame"].items())
                print(f"{label:>22} {r['size']:>9} {r['chunk_size']:>5} {r['fps']:>7.2f} {r['ms_per_frame']:>9.1f}  "
                      f"{stages}", flush=True)
    print("\nthe report's ablation (one H200), to compare with:")
    for step, fps in REPORT_ABLATION:
        print(f"  {step:<52} {fps:>6.2f} FPS")
    if args.json:
        write_json(args.json, {"benchmark": "renderer", "threads": args.threads, **machine(),
                               "cuda": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
                               "results": results, "skipped": skipped, "report_ablation_fps": dict(REPORT_ABLATION)})


if __name__ == "__main__":
    main()
