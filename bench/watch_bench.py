"""Audience benchmark: server CPU for one session watched by 1 vs N WHEP watchers (one render, one encode per
codec shared by all), and the fan-out cost per extra watcher.

Starts `python app.py` as a subprocess (so its CPU time is its own), opens one owner session (aiortc viewer,
`demo` source), then alternates rounds of 1 and N watchers (WHEP players, aiortc) for `--rounds` rounds:
each round connects the watchers, waits until each decoded a frame, waits `--warmup` s and measures the
server's user+system CPU over `--seconds`. Reports medians over the rounds; all in one run, so the rows compare.

    python -m bench.watch_bench --size 416x224 --watchers 10 --rounds 3

Definitions:
  server CPU      server process CPU seconds per wall second (1.0 = one core): render + encode + fan-out + RTP
  CPU per frame   server CPU ms per frame the owner received: the fair comparison when a busy machine keeps
                  the session below its target rate (then CPU per second only shows what was available)
  ratio           CPU per frame with N watchers / with 1
  fan-out/watcher (CPU per frame with N watchers - with 1) / (N - 1), in ms per frame
  watcher FPS     pictures decoded per second per watcher in the window (the viewers run in this process)
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import sys
import time

from bench.harness import cpu_seconds, parser, studio, write_json
from webrtc.client import StudioViewer, WhepViewer


async def measure(url: str, pid: int, owner: StudioViewer, key: str, watchers: int, warmup: float,
                  seconds: float) -> dict:
    viewers = [WhepViewer(url, owner.session_id, key, keep_pixels=False) for _ in range(watchers)]
    await asyncio.gather(*(v.start() for v in viewers))
    try:
        await asyncio.gather(*(v.wait_frames(1, timeout=120) for v in viewers))
        await asyncio.sleep(warmup)
        t0, cpu0 = time.time(), cpu_seconds(pid)
        counts0 = [len(v.frames) for v in viewers]
        owner0 = len(owner.frames)
        await asyncio.sleep(seconds)
        t1, cpu1 = time.time(), cpu_seconds(pid)
        fps = [(len(v.frames) - c) / (t1 - t0) for v, c in zip(viewers, counts0)]
    finally:
        await asyncio.gather(*(v.stop() for v in viewers))
    owner_frames = len(owner.frames) - owner0
    return {"watchers": watchers, "server_cpu": (cpu1 - cpu0) / (t1 - t0),
            "cpu_ms_per_frame": (cpu1 - cpu0) * 1e3 / max(1, owner_frames),
            "owner_fps": owner_frames / (t1 - t0), "watcher_fps": statistics.mean(fps)}


async def run(url: str, pid: int, args) -> list[dict]:
    owner = await StudioViewer(url, source="demo", size=args.size, fps=args.fps, keep_pixels=False).start()
    key = (await owner.wait_message("hello"))["watch"]["key"]
    await owner.wait_frames(1, timeout=120)
    rounds = []
    try:
        for _ in range(args.rounds):
            for n in (1, args.watchers):
                rounds.append(await measure(url, pid, owner, key, n, args.warmup, args.seconds))
                print(json.dumps(rounds[-1]), file=sys.stderr)
                await asyncio.sleep(1.0)  # let the watchers' peers close
    finally:
        await owner.close()
    return rounds


def main() -> int:
    ap = parser(__doc__, full_help=True)
    ap.add_argument("--size", default="416x224")
    ap.add_argument("--fps", type=float, default=30.0)
    ap.add_argument("--watchers", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--warmup", type=float, default=3.0)
    ap.add_argument("--seconds", type=float, default=10.0)
    args = ap.parse_args()
    with studio(1, "reference", ["--max-watchers", str(args.watchers)]) as st:
        rounds = asyncio.run(run(st.url, st.pid, args))

    def median(n: int, key: str) -> float:
        return statistics.median(r[key] for r in rounds if r["watchers"] == n)

    n = args.watchers
    one, many = median(1, "cpu_ms_per_frame"), median(n, "cpu_ms_per_frame")
    result = {"size": args.size, "target_fps": args.fps, "cpus": os.cpu_count(), "rounds": args.rounds,
              "load_average": round(os.getloadavg()[0], 2),
              "server_cpu_1": round(median(1, "server_cpu"), 3), f"server_cpu_{n}": round(median(n, "server_cpu"), 3),
              "cpu_ms_per_frame_1": round(one, 2), f"cpu_ms_per_frame_{n}": round(many, 2),
              "ratio": round(many / one, 3), "fanout_ms_per_frame_per_watcher": round((many - one) / (n - 1), 3),
              "owner_fps_1": round(median(1, "owner_fps"), 2), f"owner_fps_{n}": round(median(n, "owner_fps"), 2),
              f"watcher_fps_{n}": round(median(n, "watcher_fps"), 2)}
    print(json.dumps(result))
    write_json(args.json, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
