"""Tiny-config flash renderer on the CPU: FPS and per-stage milliseconds per chunk.

    .venv/bin/python bench/flash_cpu.py [--frames 160] [--width 64 --height 32] [--threads 1] [--weights DIR]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

from renderer import create_renderer  # noqa: E402
from renderer.flash.benchmark import STYLE_PROMPTS, synthetic_frames, timed_rollout  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--frames", type=int, default=160)
    ap.add_argument("--width", type=int, default=64)
    ap.add_argument("--height", type=int, default=32)
    ap.add_argument("--chunk-size", type=int, default=None)
    ap.add_argument("--threads", type=int, default=1, help="torch threads (1 is fastest on a shared machine)")
    ap.add_argument("--weights", default=None, help="a weights directory (default: random tiny weights)")
    ap.add_argument("--json", help="also write the report here")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    options = {"chunk_size": args.chunk_size} if args.chunk_size else {}
    if args.weights:
        renderer = create_renderer("flash", weights=args.weights, device="cpu", **options)
    else:
        renderer = create_renderer("flash", config="tiny", device="cpu", prompts=list(STYLE_PROMPTS), **options)
    frames = synthetic_frames(args.frames, args.width, args.height)
    report = {"renderer": renderer.describe(), "size": f"{args.width}x{args.height}", "threads": args.threads,
              **timed_rollout(renderer, frames, args.width, args.height)}
    print(json.dumps(report, indent=2))
    if args.json:
        Path(args.json).write_text(json.dumps({"benchmark": "flash_cpu", **report}, indent=2) + "\n")


if __name__ == "__main__":
    main()
