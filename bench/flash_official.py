"""End to end with the official AlayaRenderer-Flash directory (or random `full` weights) on a GPU: inspect, load,
the 637-frame eight-worlds rollout at 832x448 to MP4, FPS, per-stage ms, peak VRAM and the alignment probe.
Writes everything under --out (report.json, inspect.json, eight_worlds.mp4, eight_worlds_sbs.mp4, metrics.json).

    python -m bench.flash_official --weights /data/AlayaRenderer-Flash --out out/flash-official \
        [--window window-00.npy] [--text-encoder WAN_DIR]
    python -m bench.flash_official --random-full /tmp/flash-full --out out/flash-random   # no weights

Smoke run on a CPU (tiny sizes): --random-tiny /tmp/flash-tiny --device cpu --frames 16 --size 64x32.
Exit code: 0 when every step ran, 2 when the directory does not load (inspect.json says why).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import torch

from bench.harness import ROOT


def cli(*args: str) -> None:
    subprocess.run([sys.executable, "-m", "studio.cli", *args], check=True, cwd=ROOT)


def engine_window(frames: int, width: int, height: int) -> np.ndarray:
    """A (T, 5, H, W, 3) window from the built-in engine, when no official sample window is given."""
    from studio.sources import open_source

    source = open_source(["demo"], width=width, height=height, fps=30.0, seed=0)
    return np.stack([source.next_frame().data for _ in range(frames)])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    where = ap.add_mutually_exclusive_group(required=True)
    where.add_argument("--weights", type=Path, help="the official directory")
    where.add_argument("--random-full", type=Path, help="write random full weights here first (init-random)")
    where.add_argument("--random-tiny", type=Path, help="smoke run: random tiny weights")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--window", type=Path, help="an official window-NN.npy for the alignment probe")
    ap.add_argument("--text-encoder", help="a local Wan 2.1 directory (either layout) for prompts not cached")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--frames", type=int, default=637)
    ap.add_argument("--size", default="832x448")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    report: dict = {"device": args.device, "torch": torch.__version__,
                    "gpu": torch.cuda.get_device_name() if torch.cuda.is_available() else None}

    weights = args.weights
    for config, path in (("full", args.random_full), ("tiny", args.random_tiny)):
        if path is not None:
            if not path.exists():
                cli("flash", "init-random", str(path), "--config", config)
            weights = path

    from renderer import create_renderer
    from renderer.flash.probe import load_window, probe_alignment
    from renderer.flash.weights import WeightsPlan

    # 1. inspect (headers only)
    plan = WeightsPlan(weights)
    (args.out / "inspect.json").write_text(json.dumps(plan.report(), indent=2))
    report["loads"] = plan.ok
    if not plan.ok:
        print(json.dumps(report))
        return 2

    # 2. load
    if args.device.startswith("cuda"):
        torch.cuda.reset_peak_memory_stats()
    t = time.perf_counter()
    options = {"text_encoder": args.text_encoder} if args.text_encoder else {}
    renderer = create_renderer("flash", weights=str(weights), device=args.device, unknown_prompt="presets", **options)
    report["load_s"] = round(time.perf_counter() - t, 1)
    if args.device.startswith("cuda"):
        report["load_peak_vram_gib"] = round(torch.cuda.max_memory_allocated() / 2**30, 2)
    report["renderer"] = renderer.describe()

    # 3. the alignment probe: an official window if given, else 16 engine frames
    width, height = (int(v) for v in args.size.split("x"))
    window = load_window(args.window) if args.window else engine_window(16, width, height)
    report["probe"] = probe_alignment(renderer.pipeline, window)
    del renderer
    if args.device.startswith("cuda"):
        torch.cuda.empty_cache()

    # 4. the eight-worlds rollout (the report's 637 frames, a style switch every five chunks), plus side by side
    for name, extra in (("eight_worlds", []), ("eight_worlds_sbs", ["--side-by-side"])):
        metrics = args.out / f"{name}_metrics.json"
        cli("render", "demo", "--schedule", "eight-worlds", "--renderer", "flash", "--weights", str(weights),
            "--device", args.device, "--frames", str(args.frames), "--size", args.size, "--no-progress",
            "-o", str(args.out / f"{name}.mp4"), "--metrics", str(metrics), *extra)
        m = json.loads(metrics.read_text())
        report[name] = {"fps": round(m["fps"], 2), "frames": m["frames"], "stage_ms_median": m["stage_ms_median"],
                        "peak_vram_gib": round((m["peak_renderer_memory_bytes"] or 0) / 2**30, 2)}
    (args.out / "report.json").write_text(json.dumps(report, indent=2))
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
