"""What one live flash chunk costs the render worker: wall and CPU milliseconds per chunk as a live session renders
it (`render_stream`, one torch thread), and its first frame's lead (from the chunk's start to its first frame
handed over: what glass-to-glass waits on), medians over the chunks after a warm-up. On a shared, loaded machine the
worker thread's CPU time is the steadier figure; glass-to-glass itself is bench/webrtc_bench.py's.

    python -m bench.flash_live_bench --weights NANO_DIR [--chunk-sizes 4,8] [--size 160x96] [--frames 96]
"""

from __future__ import annotations

import json
import statistics
import time

import torch

from bench.harness import parser, size, synthetic_frames, write_json
from prompt_presets.conditioning import Conditioning
from prompt_presets.presets import get_preset
from renderer import create_renderer


def chunk_costs(weights: str, chunk: int, width: int, height: int, frames: int, warmup: int = 2) -> dict:
    renderer = create_renderer("flash", weights=weights, device="cpu", chunk_size=chunk)
    gbuffer = synthetic_frames(frames, width, height)
    prompt = [Conditioning.single(get_preset("cyberpunk").prompt)] * chunk
    wall, cpu, first = [], [], []
    with renderer.open_session(width, height, seed=0) as session:
        for k, start in enumerate(range(0, frames - chunk + 1, chunk)):
            w, c = time.perf_counter(), time.thread_time()
            lead = None
            for _ in session.render_stream(gbuffer[start:start + chunk], prompt):
                lead = lead or (time.perf_counter() - w) * 1e3
            if k >= warmup:
                wall.append((time.perf_counter() - w) * 1e3)
                cpu.append((time.thread_time() - c) * 1e3)
                first.append(lead)
    return {"chunk_size": chunk, "chunks_timed": len(wall), "wall_ms": round(statistics.median(wall), 1),
            "cpu_ms": round(statistics.median(cpu), 1), "first_frame_ms": round(statistics.median(first), 1)}


def main() -> None:
    ap = parser(__doc__)
    ap.add_argument("--weights", required=True, help="a flash weights directory (e.g. flash init-random --config nano)")
    ap.add_argument("--chunk-sizes", default="4,8")
    ap.add_argument("--size", default="160x96")
    ap.add_argument("--frames", type=int, default=96)
    args = ap.parse_args()
    torch.set_num_threads(1)        # as serve does (threads=1); set here so the bench also runs on older code
    width, height = size(args.size)
    rows = [chunk_costs(args.weights, int(n), width, height, args.frames) for n in args.chunk_sizes.split(",")]
    for row in rows:
        print(json.dumps(row))
    write_json(args.json, {"benchmark": "flash_live", "size": args.size, "threads": torch.get_num_threads(),
                           "rows": rows})


if __name__ == "__main__":
    main()
