"""Built-in engine frame rate: physics + one-pass G-buffer render + readback of the five targets.

    python -m bench.engine_bench [--sizes 416x224 832x448] [--frames 120] [--warmup 10] [--seed 0]

Prints, per size, the median and 10th/90th percentile FPS over the timed frames (autopilot driving) and the
CPU time per frame summed over all threads (llvmpipe renders on every core), which other load on a shared
machine disturbs much less than wall-clock FPS.
"""

from __future__ import annotations

import os
import time

import numpy as np

from bench.harness import parser, size, write_json
from gbuffer.engine import EngineSource


def measure(width: int, height: int, frames: int, warmup: int, seed: int) -> dict:
    with EngineSource(width, height, fps=30, seed=seed) as src:
        for _ in range(warmup):
            src.next_frame()
        times = []
        cpu0 = time.process_time()  # all threads, llvmpipe's included: the work, whatever else runs
        for _ in range(frames):
            t0 = time.perf_counter()
            src.next_frame()
            times.append(time.perf_counter() - t0)
        cpu_ms = (time.process_time() - cpu0) / frames * 1000
        triangles = src._raster.triangles
    fps = 1.0 / np.asarray(times)
    return {"size": f"{width}x{height}", "frames": frames, "triangles": triangles,
            "fps_median": float(np.median(fps)), "fps_p10": float(np.percentile(fps, 10)),
            "fps_p90": float(np.percentile(fps, 90)), "cpu_ms_per_frame": cpu_ms}


def main() -> None:
    ap = parser(__doc__)
    ap.add_argument("--sizes", nargs="+", default=["416x224", "832x448"])
    ap.add_argument("--frames", type=int, default=120)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    rows = []
    # Other work on the machine slows llvmpipe down; say how busy it was so figures can be judged.
    print(f"load average before: {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
    for text in args.sizes:
        r = measure(*size(text), args.frames, args.warmup, args.seed)
        rows.append(r)
        print(f"{r['size']:>9}  {r['triangles']} triangles  median {r['fps_median']:.1f} FPS  "
              f"(p10 {r['fps_p10']:.1f}, p90 {r['fps_p90']:.1f}) over {r['frames']} frames, "
              f"{r['cpu_ms_per_frame']:.1f} CPU ms/frame")
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    write_json(args.json, {"benchmark": "engine", "rows": rows})


if __name__ == "__main__":
    main()
