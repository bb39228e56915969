"""Full-size AlayaRenderer-Flash on a GPU with random weights: FPS, per-stage ms, peak VRAM.

    python -m bench.flash_gpu                       # full config, 832x448, bf16, CUDA
    python -m bench.flash_gpu --compile             # + torch.compile of transformer and decoder
    python -m bench.flash_gpu --config tiny --device cpu --width 64 --height 32 --frames 48  # smoke

Compared with the report's ablation (one H200): 31.54 FPS with streaming + 4 steps + tiny codecs, 16.2 GB.
Random weights cost the same compute as the real ones; `--weights DIR` times a real directory instead.
"""

from __future__ import annotations

import json
import time

import torch

from bench.harness import FLASH_PROMPTS, flash_rollout, parser, synthetic_frames, write_json
from renderer import create_renderer

REPORT = {"fps": 31.54, "vram_gb": 16.2}


def main() -> None:
    ap = parser(__doc__)
    ap.add_argument("--config", default="full")
    ap.add_argument("--weights", default=None)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--dtype", default=None, help="bf16 (CUDA default), fp16, fp32")
    ap.add_argument("--width", type=int, default=832)
    ap.add_argument("--height", type=int, default=448)
    ap.add_argument("--frames", type=int, default=160, help="frames to render (10 chunks of 16 by default)")
    ap.add_argument("--chunk-size", type=int, default=None)
    ap.add_argument("--warmup-chunks", type=int, default=2)
    ap.add_argument("--compile", action="store_true", help="torch.compile the transformer and the decoder")
    args = ap.parse_args()

    if args.device.startswith("cuda"):
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
        torch.backends.cudnn.benchmark = True
    options = {"chunk_size": args.chunk_size} if args.chunk_size else {}
    start = time.perf_counter()
    if args.weights:
        renderer = create_renderer("flash", weights=args.weights, device=args.device, dtype=args.dtype, **options)
    else:
        renderer = create_renderer("flash", config=args.config, device=args.device, dtype=args.dtype,
                                   prompts=list(FLASH_PROMPTS), **options)
    build_s = time.perf_counter() - start
    if args.compile:
        pipe = renderer.pipeline
        pipe.transformer.compile(dynamic=False)
        pipe.decoder.compile(dynamic=False)
    if args.device.startswith("cuda"):
        torch.cuda.reset_peak_memory_stats()
    frames = synthetic_frames(args.frames, args.width, args.height)
    result = flash_rollout(renderer, frames, args.width, args.height, warmup_chunks=args.warmup_chunks)
    report = {"renderer": renderer.describe(), "size": f"{args.width}x{args.height}", "compile": args.compile,
              "build_seconds": round(build_s, 1), **result,
              "gpu": torch.cuda.get_device_name() if args.device.startswith("cuda") else None,
              "report_reference": REPORT}
    print(json.dumps(report, indent=2))
    write_json(args.json, report)


if __name__ == "__main__":
    main()
