"""Live streaming benchmark: time to first frame, sustained FPS, glass-to-glass latency, server CPU per stream.

Starts `python app.py` as a subprocess (so its CPU time is its own), then for each size and number of
concurrent streams connects that many aiortc viewers with the frame stamp on, waits `--warmup` seconds and
measures for `--seconds`. Prints a table and JSON (also written with --json FILE).

Definitions:
  time to first frame  offer POSTed → first decoded picture at the viewer
  sustained FPS        pictures decoded per second in the window, per stream
  glass-to-glass       the server started rendering the chunk of frame k (wall clock, sent in the status
                       message) → the viewer decoded the picture stamped k; same machine, so one clock
  server CPU           server process user+system CPU seconds per wall second, divided by streams (1.0 = a core)
  where it goes        the server's part of glass-to-glass (chunk start → the frame leaving the track, from the
                       status) and the renderer's (chunk start → the frame's part rendered, its `total` stage):
                       latency_server_p50_ms, render_p50_ms; the rest is encode, network and the viewer's decode.
                       take_p50_ms: chunk start → its frames in from the source (the built-in engine renders them);
                       ready_p50_ms: chunk start → the frame handed over (so the server's share less it is pacing)
  take                 with --takes off,on each row runs once plain and once recording a take per stream

    python -m bench.webrtc_bench --sizes 416x224,832x448 --streams 1,2,4
    python -m bench.webrtc_bench --sizes 416x224 --streams 1 --takes off,on,off,on   # a take's cost
    python -m bench.webrtc_bench --sizes 416x224,832x448 --streams 1 --cluster local --workers 1
                                 # render workers on Ray: the front's CPU and the latency it adds
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import tempfile
import time

import numpy as np

# start_server and cpu_seconds stay importable from here for scripts written against the old layout
from bench.harness import cpu_seconds, parser, print_table, start_server, studio, write_json  # noqa: F401
from webrtc.client import StudioViewer


def server_split_ms(viewer: StudioViewer, since: float) -> dict:
    """Medians of the server's share of glass-to-glass and of the render itself, for chunks started after
    `since` (Unix seconds)."""
    statuses = [m for m in viewer.statuses() if m["rendered_wall"] >= since]

    def median(xs: list[float]) -> float | None:
        return round(float(np.median(xs)), 1) if xs else None

    return {"latency_server_p50_ms": median([m["latency_ms"] for m in statuses]),
            "render_p50_ms": median([m["stages_ms"]["total"] for m in statuses if "total" in m["stages_ms"]]),
            "take_p50_ms": median([m["take_ms"] for m in statuses]),
            "ready_p50_ms": median([m["ready_ms"] for m in statuses])}


def latencies_ms(viewer: StudioViewer, since: float) -> list[float]:
    rendered = {m["frame"] % 65536: m["rendered_wall"] for m in viewer.statuses()}
    return [(f.received_at - rendered[f.stamp]) * 1e3 for f in viewer.frames
            if f.received_at >= since and f.stamp in rendered]


async def measure(url: str, pid: int, size: str, streams: int, fps: float, warmup: float, seconds: float,
                  take: bool = False) -> dict:
    viewers = [StudioViewer(url, source="demo", size=size, fps=fps, stamp=True, keep_pixels=False, seed=i)
               for i in range(streams)]
    await asyncio.gather(*(v.start() for v in viewers))
    try:
        await asyncio.gather(*(v.wait_frames(1, timeout=120) for v in viewers))
        ttff = [(v.frames[0].received_at - v.offer_started) * 1e3 for v in viewers]
        if take:
            marks = [await v.send({"type": "take", "action": "start"}) for v in viewers]
            await asyncio.gather(*(v.wait_message("ack", after=m, request="take") for v, m in zip(viewers, marks)))
        await asyncio.sleep(warmup)
        t0, cpu0 = time.time(), cpu_seconds(pid)
        counts0 = [len(v.frames) for v in viewers]
        await asyncio.sleep(seconds)
        t1, cpu1 = time.time(), cpu_seconds(pid)
        fps_each = [(len(v.frames) - c) / (t1 - t0) for v, c in zip(viewers, counts0)]
        lat = [x for v in viewers for x in latencies_ms(v, t0)]
        split = server_split_ms(viewers[0], t0)
        codec = viewers[0].messages[0].get("codec") if viewers[0].messages else None
    finally:
        await asyncio.gather(*(v.close() for v in viewers))
    return {"size": size, "streams": streams, "take": take, "target_fps": fps, "codec": codec,
            "ttff_ms": round(float(np.mean(ttff)), 1), "fps_per_stream": round(float(np.mean(fps_each)), 2),
            "fps_min": round(float(np.min(fps_each)), 2),
            "latency_p50_ms": round(float(np.percentile(lat, 50)), 1) if lat else None,
            "latency_p95_ms": round(float(np.percentile(lat, 95)), 1) if lat else None,
            "server_cpu_per_stream": round((cpu1 - cpu0) / (t1 - t0) / streams, 3), **split}


ROW_COLUMNS = (("size", "size"), ("streams", "streams"), ("take", lambda r: "on" if r["take"] else "off"),
               ("codec", "codec"), ("TTFF ms", "ttff_ms"), ("FPS/stream", "fps_per_stream"), ("min", "fps_min"),
               ("g2g p50", "latency_p50_ms"), ("g2g p95", "latency_p95_ms"), ("CPU/stream", "server_cpu_per_stream"))


def main() -> int:
    ap = parser(__doc__, full_help=True)
    ap.add_argument("--sizes", default="416x224,832x448")
    ap.add_argument("--streams", default="1,2,4")
    ap.add_argument("--fps", type=float, default=30.0)
    ap.add_argument("--renderer", default="reference")
    ap.add_argument("--renderer-option", action="append", default=[], metavar="KEY=VALUE",
                        help="passed to the server, e.g. backend=torch for the reference renderer's torch path")
    ap.add_argument("--weights", help="weights directory for --renderer flash (e.g. a trained nano)")
    ap.add_argument("--warmup", type=float, default=3.0)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--takes", default="off", help="off, on, or a list (off,on,off,on) run for every row")
    ap.add_argument("--cluster", metavar="ADDRESS",
                        help="serve with --cluster ADDRESS (render workers on Ray): server CPU is then the front's")
    ap.add_argument("--workers", type=int, default=2, help="with --cluster")
    args = ap.parse_args()
    counts = [int(n) for n in args.streams.split(",")]
    takes = [t.strip() == "on" for t in args.takes.split(",")]
    takes_dir = tempfile.TemporaryDirectory(prefix="alaya-bench-takes-")
    cluster = ["--cluster", args.cluster, "--workers", str(args.workers),
               "--worker-sessions", str(max(counts))] if args.cluster else []
    options = [a for o in args.renderer_option for a in ("--renderer-option", o)]
    options += ["--weights", args.weights] if args.weights else []
    results = []
    with takes_dir, studio(max(counts), args.renderer, ["--takes-dir", takes_dir.name, *cluster, *options]) as st:
        for size in args.sizes.split(","):
            for n in counts:
                for take in takes:
                    results.append(asyncio.run(measure(st.url, st.pid, size, n, args.fps, args.warmup, args.seconds,
                                                       take)))
                    print(json.dumps(results[-1]), file=sys.stderr)
                    time.sleep(1.5)  # let the sessions close
    print(f"renderer {args.renderer}, target {args.fps:g} fps, {os.cpu_count()} CPUs")
    print_table(results, ROW_COLUMNS)
    document = {"renderer": args.renderer, "target_fps": args.fps, "cpus": os.cpu_count(), "results": results}
    print(json.dumps(document))
    write_json(args.json, document)
    return 0


if __name__ == "__main__":
    sys.exit(main())
