"""Full-size AlayaRenderer-Flash on a GPU with random weights: FPS, per-stage ms, peak VRAM.

    .venv/bin/python bench/flash_gpu.py                       # full config, 832x448, bf16, CUDA
    .venv/bin/python bench/flash_gpu.py --compile             # + torch.compile of transformer and decoder
    .venv/bin/python bench/flash_gpu.py --config tiny --device cpu --width 64 --height 32 --frames 48  # smoke

Compared with the report's ablation (one H200): 31.54 FPS with streaming + 4 steps + tiny codecs, 16.2 GB.
Random weights cost the same compute as the real ones; `--weights DIR` times a real directory instead.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

from renderer import create_renderer  # noqa: E402
from renderer.flash.benchmark import STYLE_PROMPTS, synthetic_frames, timed_rollout  # noqa: E402

REPORT = {"fps": 31.54, "vram_gb": 16.2}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
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
    ap.add_argument("--json", type=Path, default=None, help="also write the report here")
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
                                   prompts=list(STYLE_PROMPTS), **options)
    build_s = time.perf_counter() - start
    if args.compile:
        pipe = renderer.pipeline
        pipe.transformer.compile(dynamic=False)
        pipe.decoder.compile(dynamic=False)
    if args.device.startswith("cuda"):
        torch.cuda.reset_peak_memory_stats()
    frames = synthetic_frames(args.frames, args.width, args.height)
    result = timed_rollout(renderer, frames, args.width, args.height, warmup_chunks=args.warmup_chunks)
    report = {"renderer": renderer.describe(), "size": f"{args.width}x{args.height}", "compile": args.compile,
              "build_seconds": round(build_s, 1), **result,
              "gpu": torch.cuda.get_device_name() if args.device.startswith("cuda") else None,
              "report_reference": REPORT}
    text = json.dumps(report, indent=2)
    print(text)
    if args.json:
        args.json.write_text(text)


if __name__ == "__main__":
    main()
