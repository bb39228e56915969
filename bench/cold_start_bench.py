"""Cold start: the first session after a fresh server start, over N starts, on a quiet machine or with one core
kept busy.

Each start runs `python app.py` as a subprocess. As soon as /api/health says `ready` (the default session's
one-off costs paid: renderer, GL contexts and programs, the engine's world, the encoder; the free-text matcher's
warm-up, in its low-priority child, still under way) one aiortc viewer opens a session on the built-in engine and
waits for its first picture; then the server is stopped. `--at-first-answer` opens it as soon as /api/health
answers at all, while the warm-up still runs (a visitor who arrives in the first second). Time to first frame = offer
POSTed → first decoded picture, as in webrtc_bench. `--load` keeps one core busy for the whole run with a plain busy
loop (another Python process spinning `while True: pass`), as a second job on the machine would.

    python -m bench.cold_start_bench --starts 5 --size 416x224            # quiet
    python -m bench.cold_start_bench --starts 5 --size 416x224 --load     # one core busy
    python -m bench.cold_start_bench --starts 5 --size 416x224 --load --at-first-answer

Prints one JSON line per start (stderr), then the summary (stdout): the first sessions' p50 and p95 (numpy's
linear percentile over the starts), the worst, and the load average at the end. With each first frame it also
reads the CPU seconds spent so far by the server process itself and by its child processes (the free-text
matcher's model loads in one): where the start-up's CPU went, a figure other load on the machine hardly moves;
`first_session_cpu_s` is the server's CPU from the offer to the first frame (the first session's own work, plus
any warm-up still running beside it).
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from bench.harness import cpu_seconds, free_port, parser, start_server, stop, write_json
from webrtc.client import StudioViewer

BUSY_LOOP = "while True: pass"


async def first_frame_ms(url: str, size: str) -> float:
    viewer = StudioViewer(url, source="demo", size=size, keep_pixels=False)
    try:
        await viewer.start()
        await viewer.wait_frames(1, timeout=120)
        return (viewer.frames[0].received_at - viewer.offer_started) * 1e3
    finally:
        await viewer.close()


def children(pid: int) -> list[int]:
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            if int(stat.read_text().rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(stat.parent.name))
        except (OSError, ValueError, IndexError):     # gone meanwhile
            pass
    return found


def wait_ready(url: str, timeout: float = 180.0) -> None:
    """Until /api/health says `ready` (a studio without the field is ready when it answers)."""
    import httpx

    deadline = time.monotonic() + timeout
    while not httpx.get(f"{url}/api/health", timeout=10).json().get("ready", True):
        if time.monotonic() > deadline:
            raise SystemExit("the studio did not become ready")
        time.sleep(0.02)


def one_start(size: str, at_first_answer: bool) -> dict:
    port = free_port()
    t0 = time.monotonic()
    server = start_server(port, 1, "reference")
    try:
        url = f"http://127.0.0.1:{port}"
        if not at_first_answer:
            wait_ready(url)
        up_s = time.monotonic() - t0
        at_offer = cpu_seconds(server.pid)
        ttff = asyncio.run(first_frame_ms(url, size))
        own, helpers = cpu_seconds(server.pid), sum(cpu_seconds(c) for c in children(server.pid))
    finally:
        stop(server)
    return {"ttff_ms": round(ttff, 1), "up_s": round(up_s, 2), "server_cpu_s": round(own, 2),
            "first_session_cpu_s": round(own - at_offer, 2),
            "children_cpu_s": round(helpers, 2), "load_average": round(os.getloadavg()[0], 2)}


def main() -> int:
    ap = parser(__doc__, full_help=True)
    ap.add_argument("--starts", type=int, default=5, help="fresh server starts (one first session each)")
    ap.add_argument("--size", default="416x224")
    ap.add_argument("--load", action="store_true", help="keep one core busy with a busy loop meanwhile")
    ap.add_argument("--at-first-answer", action="store_true",
                    help="offer as soon as /api/health answers, not once it says ready")
    args = ap.parse_args()
    if args.starts < 1:
        ap.error("--starts must be at least 1")
    busy = subprocess.Popen([sys.executable, "-c", BUSY_LOOP]) if args.load else None
    rows = []
    try:
        for i in range(args.starts):
            rows.append({"start": i, **one_start(args.size, args.at_first_answer)})
            print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    finally:
        if busy is not None:
            stop(busy)
    ms = np.asarray([r["ttff_ms"] for r in rows])
    result = {"size": args.size, "load": "one core busy" if args.load else "quiet", "starts": len(rows),
              "offer_at": "first answer" if args.at_first_answer else "ready",
              "ttff_p50_ms": round(float(np.percentile(ms, 50)), 1),
              "ttff_p95_ms": round(float(np.percentile(ms, 95)), 1), "ttff_max_ms": round(float(ms.max()), 1),
              "ttff_ms": [r["ttff_ms"] for r in rows], "up_s_median": float(np.median([r["up_s"] for r in rows])),
              "server_cpu_s_median": float(np.median([r["server_cpu_s"] for r in rows])),
              "first_session_cpu_s_median": float(np.median([r["first_session_cpu_s"] for r in rows])),
              "children_cpu_s_median": float(np.median([r["children_cpu_s"] for r in rows])),
              "cpus": os.cpu_count(), "load_average": round(os.getloadavg()[0], 2)}
    print(json.dumps(result))
    write_json(args.json, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
