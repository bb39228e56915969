"""Reference style renderer frame rate, per size and backend, with per-stage times.

    python -m bench.reference_bench [--sizes 416x224 832x448] [--backends torch,gl] [--frames 50] [--threads 1]
                                    [--source engine|synthetic|PATH] [--device cpu] [--json out.json]

The G-buffer frames are produced (engine on autopilot, the synthetic scene, or any readable sequence) and
kept in memory before timing, so only rendering is measured; frames of another size are resized by the
session, as in the studio. Each timed frame takes the next of the eight report styles, changing every
5 frames like the report's demo. Prints the median FPS over the timed frames, the 10th percentile and the
best frame (on a shared machine the median depends on the neighbours); --json writes the same figures.
--threads is torch's CPU threads and llvmpipe's (LP_NUM_THREADS), so both backends get the same cores.
"""

from __future__ import annotations

import os
import time

import numpy as np
import torch

from bench.harness import machine, parser, size, write_json
from prompt_presets import REPORT_STYLES, conditioning_for
from renderer.reference import ReferenceRenderer
from renderer.reference.synthetic import synthetic_gbuffer


def load_frames(source: str, width: int, height: int, count: int) -> list:
    if source == "synthetic":
        return [synthetic_gbuffer(width, height, t=i / 30, index=i) for i in range(count)]
    if source == "engine":
        os.environ.setdefault("EGL_PLATFORM", "surfaceless")
        from gbuffer.engine import EngineSource

        with EngineSource.demo(width, height, fps=30) as src:
            return [src.next_frame() for _ in range(count)]
    from gbuffer.formats import open_sequence

    with open_sequence(source) as seq:
        return [seq.read(i % len(seq)) for i in range(count)]


def measure(frames: list, width: int, height: int, warmup: int, device: str | None, backend: str) -> dict:
    session = ReferenceRenderer(device, backend=backend).open_session(width, height)
    styles = [conditioning_for(REPORT_STYLES[(i // 5) % len(REPORT_STYLES)]) for i in range(len(frames))]
    for f, c in zip(frames[:warmup], styles[:warmup]):
        session.render([f], [c])
    totals, stages = [], {s: [] for s in session.stages}
    for f, c in zip(frames, styles):
        t0 = time.perf_counter()
        result = session.render([f], [c])
        totals.append((time.perf_counter() - t0) * 1000.0)
        for s in session.stages:
            stages[s].append(result.timings_ms[s])
    median = float(np.median(totals))
    return {"size": f"{width}x{height}", "backend": backend, "frames": len(frames), "device": device or "auto",
            "ms_median": median, "fps_median": 1000.0 / median,
            "fps_p10": float(1000.0 / np.percentile(totals, 90)),
            "fps_best": float(1000.0 / np.min(totals)),  # what a quiet core gives; a shared machine varies
            "stage_ms_median": {s: float(np.median(v)) for s, v in stages.items()},
            "peak_memory_bytes": result.peak_memory_bytes}


def main() -> None:
    ap = parser(__doc__)
    ap.add_argument("--sizes", nargs="+", default=["416x224", "832x448"])
    ap.add_argument("--frames", type=int, default=50)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--threads", type=int, default=1, help="CPU threads for torch and llvmpipe (default 1)")
    ap.add_argument("--backends", default="torch,gl", help="comma-separated: torch, gl")
    ap.add_argument("--source", default="engine", help="engine, synthetic, or a G-buffer sequence path")
    ap.add_argument("--device", default="cpu")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    os.environ["LP_NUM_THREADS"] = str(args.threads)   # read when the GL context opens (the first gl row)

    results = []
    print(f"{'size':>9} {'backend':>7} {'FPS':>6} {'p10':>6} {'best':>6} {'ms':>7}  stage ms")
    for text in args.sizes:
        w, h = size(text)
        frames = load_frames(args.source, w, h, args.frames)
        for backend in args.backends.split(","):
            r = measure(frames, w, h, args.warmup, args.device, backend)
            results.append(r)
            print(f"{r['size']:>9} {backend:>7} {r['fps_median']:6.1f} {r['fps_p10']:6.1f} {r['fps_best']:6.1f} "
                  f"{r['ms_median']:7.1f}  " + " ".join(f"{s} {v:.1f}" for s, v in r["stage_ms_median"].items()))
    if args.json:
        write_json(args.json, {"benchmark": "reference_renderer", "source": args.source, "threads": args.threads,
                               **machine(), "results": results})


if __name__ == "__main__":
    main()
