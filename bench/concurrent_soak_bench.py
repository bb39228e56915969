"""Concurrent soak: R rounds of K live sessions at once, and the server's memory after each round (issue 29).

Visitors arrive in groups, not one by one. Each round connects K real aiortc viewers at once (source "demo",
the built-in engine, so every session has its own G-buffer raster), lets them stream for `--seconds`, hangs
them all up, waits until `/api/health` says `sessions: 0`, and then reads the server's resident memory
(`VmRSS`) and thread count from /proc. The server is `python app.py` in its own process, so its memory is its
own (the viewers' decoders live in this process).

Goal: after the first `--settle` rounds (allocator pools and caches fill), RSS grows by at most 5 % over the
remaining rounds, and per-stream FPS in the last round is within 10 % of the first.

    python -m bench.concurrent_soak_bench                          # K=4, R=25, 20 s sessions, 416x224
    python -m bench.concurrent_soak_bench --rounds 8 --seconds 6   # a short look
    python -m bench.concurrent_soak_bench --rounds 6 --then watchers,takes   # + one round of each path
    python -m bench.concurrent_soak_bench --rounds 6 --server-arg=--batch-sessions
    python -m bench.concurrent_soak_bench --server-env MALLOC_ARENA_MAX=2   # an allocator setting to compare

`--then` adds one round per named path after the plain rounds: `watchers` (each session also gets a WHEP
player, with the status channel), `takes` (each session records a take for the whole round).
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


async def one_round(url: str, pid: int, args: argparse.Namespace, path: str,
                    round_no: int) -> tuple[list[float], float]:
    """K sessions at once for `seconds`; → each stream's decoded FPS over the window after `warmup`, and the
    server's CPU per stream in that window (1.0 = a core)."""
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
        counts, t0, cpu0 = [len(v.frames) for v in viewers], time.monotonic(), cpu_seconds(pid)
        await asyncio.sleep(max(0.5, args.seconds - args.warmup))
        elapsed, cpu = time.monotonic() - t0, cpu_seconds(pid) - cpu0
        return [(len(v.frames) - c) / elapsed for v, c in zip(viewers, counts)], cpu / elapsed / args.streams
    finally:
        await asyncio.gather(*(w.stop() for w in extras), return_exceptions=True)
        await asyncio.gather(*(v.close() for v in viewers))


async def soak(url: str, pid: int, args: argparse.Namespace) -> list[dict]:
    rows = [{"round": 0, "path": "start", **proc_status(pid)}]
    print(json.dumps(rows[0]), file=sys.stderr)
    plan = ["plain"] * args.rounds + [p for p in args.then.split(",") if p]
    for n, path in enumerate(plan, 1):
        fps, cpu = await one_round(url, pid, args, path, n)
        await sessions_ended(url)
        await asyncio.sleep(args.idle)   # closes finish (peers, executor jobs) before memory is read
        rows.append({"round": n, "path": path, **proc_status(pid), "fps_per_stream": round(float(np.mean(fps)), 2),
                     "fps_min": round(float(np.min(fps)), 2), "server_cpu_per_stream": round(cpu, 3)})
        print(json.dumps(rows[-1]), file=sys.stderr)
    return rows


def verdict(rows: list[dict], settle: int) -> dict:
    plain = [r for r in rows[1:] if r["path"] == "plain"]
    if len(plain) <= settle:
        return {"rss_growth_after_settle_pct": None, "fps_last_vs_first": None, "goal_met": None}
    base, last = plain[settle - 1]["rss_mib"], plain[-1]["rss_mib"]
    growth = 100.0 * (last - base) / base
    fps_ratio = plain[-1]["fps_per_stream"] / plain[0]["fps_per_stream"] if plain[0]["fps_per_stream"] else None
    return {"rss_after_settle_mib": base, "rss_last_mib": last, "rss_growth_after_settle_pct": round(growth, 1),
            "fps_last_vs_first": None if fps_ratio is None else round(fps_ratio, 3),
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
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args()
    unknown = [p for p in args.then.split(",") if p and p not in PATHS[1:]]
    if unknown or args.streams < 1 or args.rounds < 1 or args.seconds <= args.warmup:
        parser.error(f"--then takes {','.join(PATHS[1:])}" if unknown else
                     "--streams and --rounds must be at least 1, --seconds more than --warmup")
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
    print(f"{'round':>5} {'path':>8} {'RSS MiB':>8} {'threads':>7} {'FPS/stream':>10} {'min':>6} {'CPU/stream':>10}")
    for r in rows:
        print(f"{r['round']:>5} {r['path']:>8} {r['rss_mib']:>8} {r['threads']:>7} "
              f"{r.get('fps_per_stream', '-'):>10} {r.get('fps_min', '-'):>6} "
              f"{r.get('server_cpu_per_stream', '-'):>10}")
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
