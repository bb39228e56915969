"""Tiny-config flash renderer on the CPU: FPS and per-stage milliseconds per chunk.

    python -m bench.flash_cpu [--frames 160] [--width 64 --height 32] [--threads 1] [--weights DIR]
"""

from __future__ import annotations

import json

import torch

from bench.harness import FLASH_PROMPTS, flash_rollout, parser, synthetic_frames, write_json
from renderer import create_renderer


def main() -> None:
    ap = parser(__doc__)
    ap.add_argument("--frames", type=int, default=160)
    ap.add_argument("--width", type=int, default=64)
    ap.add_argument("--height", type=int, default=32)
    ap.add_argument("--chunk-size", type=int, default=None)
    ap.add_argument("--threads", type=int, default=1, help="torch threads (1 is fastest on a shared machine)")
    ap.add_argument("--weights", default=None, help="a weights directory (default: random tiny weights)")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    options = {"chunk_size": args.chunk_size} if args.chunk_size else {}
    if args.weights:
        # the benches' free-text prompts are in no weights' cache: they render as their nearest presets
        renderer = create_renderer("flash", weights=args.weights, device="cpu", unknown_prompt="presets", **options)
    else:
        renderer = create_renderer("flash", config="tiny", device="cpu", prompts=list(FLASH_PROMPTS), **options)
    frames = synthetic_frames(args.frames, args.width, args.height)
    report = {"renderer": renderer.describe(), "size": f"{args.width}x{args.height}", "threads": args.threads,
              **flash_rollout(renderer, frames, args.width, args.height)}
    print(json.dumps(report, indent=2))
    write_json(args.json, {"benchmark": "flash_cpu", **report})


if __name__ == "__main__":
    main()
