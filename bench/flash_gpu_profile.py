"""Where a full-size flash chunk spends its GPU time: torch.profiler over chunks of one stream and of two batched
sessions, the top kernels by device time. Answers why batching two sessions gains nothing at 832x448
(docs/results/h200-flash-batch.json): if the chunk is bound by a few large kernels, a second session's tokens
cannot ride along for free.

    python -m bench.flash_gpu_profile --json profile.json                      # full, 832x448, bf16, CUDA
    python -m bench.flash_gpu_profile --config tiny --device cpu --width 64 --height 32   # smoke
"""

from __future__ import annotations

import torch
from torch.profiler import ProfilerActivity, profile

from bench.harness import FLASH_PROMPTS, parser, synthetic_frames, write_json
from prompt_presets.conditioning import Conditioning
from renderer import create_renderer
from renderer.flash.batch import render_batch


def top_kernels(prof, device: str, rows: int) -> list[dict]:
    """The ops or kernels with the most *self* time (so nothing is counted twice), and the sum over all of them."""
    key = "self_device_time_total" if device.startswith("cuda") else "self_cpu_time_total"
    events = sorted(prof.key_averages(), key=lambda e: getattr(e, key, 0.0), reverse=True)
    total = sum(getattr(e, key, 0.0) for e in events)
    return [{"name": e.key[:120], "ms": round(getattr(e, key, 0.0) / 1e3, 2), "calls": e.count}
            for e in events[:rows]] + [{"name": "(all, self time)", "ms": round(total / 1e3, 2), "calls": 0}]


def render_chunk(sessions: list, conds: list, frames, k: int) -> None:
    """Chunk `k` of `frames` for every session: one forward pass for several, the session's own for one."""
    size = len(conds[0])
    part = frames[k * size:(k + 1) * size]
    if len(sessions) > 1:
        render_batch(sessions, [part] * len(sessions), conds)
    else:
        sessions[0].render(part, conds[0])


def main() -> None:
    ap = parser(__doc__)
    ap.add_argument("--config", default="full")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--width", type=int, default=832)
    ap.add_argument("--height", type=int, default=448)
    ap.add_argument("--chunks", type=int, default=2)
    ap.add_argument("--rows", type=int, default=25)
    args = ap.parse_args()
    cuda = args.device.startswith("cuda")
    renderer = create_renderer("flash", config=args.config, device=args.device, prompts=list(FLASH_PROMPTS))
    size = renderer.chunk_size
    frames = synthetic_frames(size * (args.chunks + 2), args.width, args.height)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    report = {"renderer": renderer.describe(), "size": f"{args.width}x{args.height}", "chunks": args.chunks}
    for n in (1, 2):
        sessions = [renderer.open_session(args.width, args.height, seed=s) for s in range(n)]
        conds = [[Conditioning.single(FLASH_PROMPTS[s % 2])] * size for s in range(n)]
        try:
            render_chunk(sessions, conds, frames, 0)
            render_chunk(sessions, conds, frames, 1)   # warm: allocator, kernels' autotuning, history filled
            if cuda:
                torch.cuda.synchronize()
            with profile(activities=activities) as prof:
                for k in range(2, 2 + args.chunks):
                    render_chunk(sessions, conds, frames, k)
                if cuda:
                    torch.cuda.synchronize()
        finally:
            for session in sessions:
                session.close()
        rows = top_kernels(prof, args.device, args.rows)
        report[f"sessions_{n}"] = rows
        print(f"== {n} session(s), {args.chunks} chunks")
        for row in rows:
            print(f"{row['ms']:10.2f} ms {row['calls']:6d}  {row['name']}")
    write_json(args.json, report)


if __name__ == "__main__":
    main()
