"""Concurrent soak: R rounds of K live sessions at once, and the server's memory after each round (issue 29).

Visitors arrive in groups, not one by one. Each round connects K real aiortc viewers at once (source "demo",
the built-in engine, so every session has its own G-buffer raster), lets them stream for `--seconds`, hangs
them all up, waits until `/api/health` says `sessions: 0`, and then reads the server's resident memory
(`VmRSS`) and thread count from /proc. The server is `python app.py` in its own process, so its memory is its
own (the viewers' decoders live in this process).

Goal: after the first `--settle` rounds (allocator pools and caches fill), RSS grows by at most 5 % over the
remaining rounds, and per-stream FPS in the last round is within 10 % of the first. The first round starts once
the server's start-up work is over (`/api/health`: `ready`, `text_matching_ready`), so it is a round of
sessions like the last, not one that shares the cores with loading the free-text matcher.

How FPS is measured, so that it says whether the sessions degrade and not how busy the machine was at that
moment: each stream's frames are counted per whole second of its steady part only — from `--warmup` s after
every stream's first frame (connection set-up, the first keyframe and the first GL programs left out) to 1 s
before the hang-up (closing left out) — and the stream's FPS is the interquartile mean of those seconds'
counts (`steady_fps`), so a stall or a burst in a few seconds (a collection, another process) does not move
it; a round's `fps_per_stream` is the median over its streams (the mean and the slowest beside it). The bar and its
definition are unchanged: that figure in the last plain round within 10 % of the first.
Where the K sessions together need more CPU than the machine has (4 sessions at 416x224 on 2 cores: ~11 FPS
each against a 30 FPS target), every round's FPS is its share of saturated cores, and rounds differ by 10-40 %
with nothing degrading; there the ratio measures contention. At a size where K sessions hold the target rate
(`held` = FPS / target near 1), a session that got slower round after round (a leak, a queue that grows) shows
as FPS falling below the target, so judge the FPS goal there (RELIABILITY.md says which size) and the memory
goal at the soak's size.

    python -m bench.concurrent_soak_bench                          # K=4, R=25, 20 s sessions, 416x224
    python -m bench.concurrent_soak_bench --rounds 8 --seconds 6   # a short look
    python -m bench.concurrent_soak_bench --rounds 6 --then watchers,takes   # + one round of each path
    python -m bench.concurrent_soak_bench --rounds 6 --server-arg=--batch-sessions
    python -m bench.concurrent_soak_bench --server-env MALLOC_ARENA_MAX=2   # an allocator setting to compare
    python -m bench.concurrent_soak_bench --rounds 25 --seconds 10 --size 160x96   # the FPS goal, at a held rate
    python -m bench.concurrent_soak_bench --ray --rounds 3 --seconds 8  # render workers on a local Ray

`--then` adds one round per named path after the plain rounds: `watchers` (each session also gets a WHEP
player, with the status channel), `takes` (each session records a take for the whole round).
`--ray` renders on Ray workers (`app.py --cluster local --workers 2 --worker-sessions K/2`: the studio starts
a local Ray and stops it when it exits): the sessions' renderers then live in the workers' processes, so each
row also reads the workers' RSS and threads (their pids from `/api/health`'s `workers`).
Prints one JSON object per round to stderr, then a table and one JSON document (also written with --json).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import httpx
import numpy as np

from bench.harness import cpu_seconds, start_server
from studio.server.background import free_port
from webrtc.client import StudioViewer, WhepViewer

PATHS = ("plain", "watchers", "takes")


def proc_status(pid: int) -> dict[str, int]:
    """VmRSS (MiB) and Threads of a process, from /proc/PID/status."""
    fields = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines() if ":" in line)
    return {"rss_mib": int(fields["VmRSS"].split()[0]) // 1024, "threads": int(fields["Threads"])}


async def sessions_ended(url: str, timeout: float = 120.0) -> None:
    async with httpx.AsyncClient(timeout=30) as http:
        deadline = time.monotonic() + timeout
        while (await http.get(f"{url}/api/health")).json()["sessions"]:
            if time.monotonic() > deadline:
                raise SystemExit(f"sessions still open {timeout:g} s after their viewers left")
            await asyncio.sleep(0.25)


def steady_fps(arrivals: list[float], start: float, end: float) -> float | None:
    """Frames per second over the whole seconds in [start, end) (wall clock, s): the interquartile mean of the
    frames that arrived in each second — the quarter of the seconds with the fewest and the quarter with the
    most are left out, the rest averaged (a median of whole-second counts would be quantised to one frame,
    9 % at 11 FPS). None when the window holds no whole second."""
    seconds = int(end - start)
    if seconds < 1:
        return None
    counts = np.sort(np.bincount([int(t - start) for t in arrivals if start <= t < start + seconds],
                                 minlength=seconds)[:seconds])
    cut = seconds // 4
    return float(counts[cut:seconds - cut].mean())


async def worker_status(url: str) -> dict[str, int]:
    """The Ray render workers' summed RSS and threads ({} without --cluster), their pids from /api/health."""
    async with httpx.AsyncClient(timeout=30) as http:
        workers = (await http.get(f"{url}/api/health")).json().get("workers") or []
    status = [proc_status(w["pid"]) for w in workers if w.get("pid") and Path(f"/proc/{w['pid']}").exists()]
    if not status:
        return {}
    return {"workers": len(status), "workers_rss_mib": sum(s["rss_mib"] for s in status),
            "workers_threads": sum(s["threads"] for s in status)}


async def one_round(url: str, pid: int, args: argparse.Namespace, path: str,
                    round_no: int) -> tuple[list[float], float]:
    """K sessions at once for `seconds`; → each stream's steady FPS (`steady_fps`, from `warmup` s after every
    stream's first frame to 1 s before the hang-up), and the server's CPU per stream in that window (1.0 = a
    core)."""
    viewers = [StudioViewer(url, source="demo", size=args.size, fps=args.fps, keep_pixels=False,
                            seed=round_no * args.streams + i) for i in range(args.streams)]
    extras: list[WhepViewer] = []
    try:
        await asyncio.gather(*(v.start() for v in viewers))
        await asyncio.gather(*(v.wait_frames(1, timeout=120) for v in viewers))
        if path == "watchers":
            hellos = [await v.wait_message("hello") for v in viewers]
            extras = [WhepViewer(url, v.session_id, h["watch"]["key"], status=True, keep_pixels=False)
                      for v, h in zip(viewers, hellos)]
            await asyncio.gather(*(w.start() for w in extras))
            await asyncio.gather(*(w.wait_frames(1, timeout=120) for w in extras))
        elif path == "takes":
            marks = [await v.send({"type": "take", "action": "start"}) for v in viewers]
            await asyncio.gather(*(v.wait_message("ack", after=m, request="take") for v, m in zip(viewers, marks)))
        await asyncio.sleep(args.warmup)
        start, cpu0 = time.time(), cpu_seconds(pid)
        await asyncio.sleep(max(1.0, args.seconds - args.warmup - 1.0))
        end, cpu = time.time(), cpu_seconds(pid) - cpu0
        await asyncio.sleep(1.0)                                       # the last second before the hang-up
        fps = [steady_fps([f.received_at for f in v.frames], start, end) for v in viewers]
        return [f for f in fps if f is not None], cpu / (end - start) / args.streams
    finally:
        await asyncio.gather(*(w.stop() for w in extras), return_exceptions=True)
        await asyncio.gather(*(v.close() for v in viewers))


async def started(url: str, timeout: float = 300.0) -> float:
    """Wait until the server's start-up work is over (its warm-up and the free-text matcher's, /api/health), so
    the first round measures sessions, not the start-up beside them; → the seconds waited."""
    t0 = time.monotonic()
    async with httpx.AsyncClient(timeout=30) as http:
        while True:
            health = (await http.get(f"{url}/api/health")).json()
            if health["ready"] and health.get("text_matching_ready") in (True, None):
                return time.monotonic() - t0
            if time.monotonic() - t0 > timeout:
                raise SystemExit(f"the server's start-up work was not over after {timeout:g} s")
            await asyncio.sleep(0.25)


async def soak(url: str, pid: int, args: argparse.Namespace) -> list[dict]:
    waited = await started(url)
    rows = [{"round": 0, "path": "start", **proc_status(pid), **await worker_status(url),
             "start_up_s": round(waited, 1)}]
    print(json.dumps(rows[0]), file=sys.stderr)
    plan = ["plain"] * args.rounds + [p for p in args.then.split(",") if p]
    for n, path in enumerate(plan, 1):
        fps, cpu = await one_round(url, pid, args, path, n)
        await sessions_ended(url)
        await asyncio.sleep(args.idle)   # closes finish (peers, executor jobs) before memory is read
        rows.append({"round": n, "path": path, **proc_status(pid), **await worker_status(url),
                     "fps_per_stream": round(float(np.median(fps)), 2), "fps_mean": round(float(np.mean(fps)), 2),
                     "fps_min": round(float(np.min(fps)), 2), "held": round(float(np.median(fps)) / args.fps, 3),
                     "server_cpu_per_stream": round(cpu, 3)})
        print(json.dumps(rows[-1]), file=sys.stderr)
    return rows


def verdict(rows: list[dict], settle: int) -> dict:
    plain = [r for r in rows[1:] if r["path"] == "plain"]
    if len(plain) <= settle:
        return {"rss_growth_after_settle_pct": None, "fps_last_vs_first": None, "goal_met": None}
    base, last = plain[settle - 1]["rss_mib"], plain[-1]["rss_mib"]
    growth = 100.0 * (last - base) / base
    fps_ratio = plain[-1]["fps_per_stream"] / plain[0]["fps_per_stream"] if plain[0]["fps_per_stream"] else None
    workers = {}
    if "workers_rss_mib" in plain[settle - 1] and "workers_rss_mib" in plain[-1]:   # --ray: the renderers' memory
        w_base, w_last = plain[settle - 1]["workers_rss_mib"], plain[-1]["workers_rss_mib"]
        workers = {"workers_rss_after_settle_mib": w_base, "workers_rss_last_mib": w_last,
                   "workers_rss_growth_after_settle_pct": round(100.0 * (w_last - w_base) / w_base, 1)}
    return {"rss_after_settle_mib": base, "rss_last_mib": last, "rss_growth_after_settle_pct": round(growth, 1),
            **workers, "fps_last_vs_first": None if fps_ratio is None else round(fps_ratio, 3),
            # whether the rounds held the target rate: below ~0.9 the FPS ratio measures CPU contention
            "held_first": plain[0]["held"], "held_last": plain[-1]["held"],
            "goal_met": growth <= 5.0 and fps_ratio is not None and abs(fps_ratio - 1) <= 0.10}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--streams", "-k", type=int, default=4, help="sessions at once (K)")
    parser.add_argument("--rounds", "-r", type=int, default=25, help="plain rounds (R)")
    parser.add_argument("--seconds", type=float, default=20.0, help="each session's length")
    parser.add_argument("--warmup", type=float, default=2.0, help="seconds after the first frame before FPS counts")
    parser.add_argument("--idle", type=float, default=2.0, help="seconds between sessions: 0 and reading RSS")
    parser.add_argument("--settle", type=int, default=5, help="rounds before the growth goal applies")
    parser.add_argument("--size", default="416x224")
    parser.add_argument("--fps", type=float, default=30.0)
    parser.add_argument("--renderer", default="reference")
    parser.add_argument("--then", default="", help=f"one round each of these paths afterwards: {','.join(PATHS[1:])}")
    parser.add_argument("--server-arg", action="append", default=[], metavar="ARG",
                        help="passed to app.py, e.g. --server-arg=--batch-sessions (repeatable)")
    parser.add_argument("--server-env", action="append", default=[], metavar="KEY=VALUE",
                        help="set in the server's environment, e.g. MALLOC_ARENA_MAX=2 (repeatable)")
    parser.add_argument("--ray", action="store_true",
                        help="render on 2 Ray workers of a local Ray the studio starts (app.py --cluster local)")
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args()
    if args.ray:
        args.server_arg += ["--cluster", "local", "--workers", "2", "--worker-sessions", str(-(-args.streams // 2))]
    unknown = [p for p in args.then.split(",") if p and p not in PATHS[1:]]
    if unknown or args.streams < 1 or args.rounds < 1 or args.seconds < args.warmup + 2:
        parser.error(f"--then takes {','.join(PATHS[1:])}" if unknown else
                     "--streams and --rounds must be at least 1, --seconds at least --warmup + 2 "
                     "(a whole steady second and the closing one)")
    port = free_port()
    os.environ.update(kv.split("=", 1) for kv in args.server_env)   # the server inherits them (read at its start)
    with tempfile.TemporaryDirectory(prefix="alaya-soak-takes-") as takes_dir:
        server = start_server(port, args.streams, args.renderer, ["--size", args.size, "--takes-dir", takes_dir,
                                                                  "--take-min-free-mb", "16", *args.server_arg])
        try:
            rows = asyncio.run(soak(f"http://127.0.0.1:{port}", server.pid, args))
        finally:
            server.terminate()
            server.wait(30)
    summary = verdict(rows, args.settle)
    print(f"{args.streams} sessions at once, {args.seconds:g} s each, {args.size}, renderer {args.renderer}, "
          f"{os.cpu_count()} CPUs, server args {args.server_arg or '-'}, env {args.server_env or '-'}")
    print(f"{'round':>5} {'path':>8} {'RSS MiB':>8} {'threads':>7} {'FPS/stream':>10} {'min':>6} {'held':>5} "
          f"{'CPU/stream':>10} {'workers MiB':>11}")
    for r in rows:
        print(f"{r['round']:>5} {r['path']:>8} {r['rss_mib']:>8} {r['threads']:>7} "
              f"{r.get('fps_per_stream', '-'):>10} {r.get('fps_min', '-'):>6} {r.get('held', '-'):>5} "
              f"{r.get('server_cpu_per_stream', '-'):>10} {r.get('workers_rss_mib', '-'):>11}")
    print(json.dumps(summary))
    document = {"streams": args.streams, "rounds": args.rounds, "seconds": args.seconds, "size": args.size,
                "renderer": args.renderer, "server_args": args.server_arg, "server_env": args.server_env,
                "cpus": os.cpu_count(), "rows": rows, **summary}
    print(json.dumps(document))
    if args.json:
        args.json.write_text(json.dumps(document, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
