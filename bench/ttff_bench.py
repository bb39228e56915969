"""Time to first frame on a warm server: N sessions one after another, offer POSTed → first decoded picture.

Starts `python app.py` as a subprocess, waits `--settle` seconds after it answers (the start-up warm-ups, such
as the free-text matcher, load in the background meanwhile), then opens `--sessions` aiortc viewers one at a
time, each until its first picture, and closes it. Prints each figure, the median and the worst.

    python -m bench.ttff_bench --size 416x224 --sessions 10 --settle 15
"""

from __future__ import annotations

import asyncio
import json
import statistics
import sys
import time

import httpx

from bench.harness import parser, studio, write_json
from webrtc.client import StudioViewer


async def sessions(url: str, size: str, count: int) -> list[float]:
    out = []
    for seed in range(count):
        viewer = StudioViewer(url, source="demo", size=size, seed=seed, keep_pixels=False)
        t0 = time.perf_counter()
        await viewer.start()
        await viewer.wait_frames(1, timeout=60)
        out.append((time.perf_counter() - t0) * 1e3)
        await viewer.close()
        await gone(url)      # the next session starts on an idle server, as a new visitor would find it
    return out


async def gone(url: str, timeout: float = 30.0) -> None:
    async with httpx.AsyncClient(timeout=10) as http:
        deadline = time.monotonic() + timeout
        while (await http.get(f"{url}/api/health")).json()["sessions"]:   # the list is the admin's (issue 26)
            if time.monotonic() > deadline:
                raise SystemExit("a closed session was not freed within 30 s")
            await asyncio.sleep(0.05)


def main() -> int:
    ap = parser(__doc__, full_help=True)
    ap.add_argument("--size", default="416x224")
    ap.add_argument("--sessions", type=int, default=10)
    ap.add_argument("--settle", type=float, default=15.0)
    args = ap.parse_args()
    with studio(1, "reference") as st:
        time.sleep(args.settle)
        ms = asyncio.run(sessions(st.url, args.size, args.sessions))
    result = {"size": args.size, "sessions": len(ms), "ttff_ms": [round(m) for m in ms],
              "median_ms": round(statistics.median(ms)), "worst_ms": round(max(ms))}
    print(json.dumps(result))
    write_json(args.json, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
