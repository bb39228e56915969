"""Batched flash sessions: throughput for 1, 2 and 4 sessions, batched in one forward pass
(renderer/flash/batch.py) vs rendered one after another, in one run with the rows alternating.

    python -m bench.flash_batch_bench --sessions 1,2,4 --chunks 6 --width 128 --height 64 --threads 2
    python -m bench.flash_batch_bench --config full --device cuda --width 832 --height 448 \
        --sessions 1,2 --chunks 5 --repeats 2          # the GPU figure: 2 sessions >= 24 FPS each on one H200

Throughput = frames delivered across all sessions per second of wall time, after one warm-up chunk each;
medians over --repeats rounds, the order within a round alternating.
"""

from __future__ import annotations

import json
import statistics
import sys
import time

import torch

from bench.harness import FLASH_PROMPTS, parser, synthetic_frames, write_json
from prompt_presets.conditioning import Conditioning
from renderer import create_renderer
from renderer.flash.batch import render_batch


def sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def run(renderer, n: int, chunks: int, width: int, height: int, batched: bool, device: str = "cpu") -> float:
    size = renderer.chunk_size
    frames = synthetic_frames(size * (chunks + 1), width, height)
    prompts = list(FLASH_PROMPTS)
    conds = [[Conditioning.single(prompts[s % len(prompts)])] * size for s in range(n)]
    sessions = [renderer.open_session(width, height, seed=s) for s in range(n)]
    try:
        def chunk(k: int) -> None:
            part = frames[k * size:(k + 1) * size]
            if batched:
                render_batch(sessions, [part] * n, conds)
            else:
                for s, session in enumerate(sessions):
                    session.render(part, conds[s])
        chunk(0)                                     # warm-up: first-chunk allocations, anchors
        sync(device)
        t0 = time.perf_counter()
        for k in range(1, chunks + 1):
            chunk(k)
        sync(device)
        return n * size * chunks / (time.perf_counter() - t0)
    finally:
        for session in sessions:
            session.close()


def main() -> int:
    ap = parser(__doc__)
    ap.add_argument("--sessions", default="1,2,4")
    ap.add_argument("--chunks", type=int, default=6)
    ap.add_argument("--width", type=int, default=128)
    ap.add_argument("--height", type=int, default=64)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=4, help="rounds of (sequential, batched) per session count")
    ap.add_argument("--config", default="tiny")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--dtype", default=None, help="bf16 (CUDA default), fp16, fp32")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    renderer = create_renderer("flash", config=args.config, device=args.device, dtype=args.dtype,
                               prompts=list(FLASH_PROMPTS))
    run(renderer, 2, 2, args.width, args.height, True, args.device)     # warm the process (allocator, kernels)
    rows = []
    for n in (int(x) for x in args.sessions.split(",")):
        one, many = [], []
        for r in range(args.repeats):
            # alternate which goes first, so drift on a shared machine hits both alike
            for batched in ((False, True) if r % 2 == 0 else (True, False)):
                (many if batched else one).append(run(renderer, n, args.chunks, args.width, args.height, batched,
                                                      args.device))
        seq, bat = statistics.median(one), statistics.median(many)
        rows.append({"sessions": n, "sequential_fps": round(seq, 1), "batched_fps": round(bat, 1),
                     "ratio": round(bat / seq, 2)})
        print(f"{n} sessions: one after another {seq:.1f} FPS, batched {bat:.1f} FPS, x{bat / seq:.2f}", flush=True)
    report = {"config": args.config, "device": args.device, "size": f"{args.width}x{args.height}",
              "threads": args.threads,
              "chunk_size": renderer.chunk_size, "rows": rows}
    print(json.dumps(report))
    write_json(args.json, report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
