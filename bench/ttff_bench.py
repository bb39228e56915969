"""Time to first frame on a warm server: N sessions one after another, offer POSTed → first decoded picture.

Starts `python app.py` as a subprocess, waits `--settle` seconds after it answers (the start-up warm-ups, such
as the free-text matcher, load in the background meanwhile), then opens `--sessions` aiortc viewers one at a
time, each until its first picture, and closes it. Prints each figure, the median and the worst.

    .venv/bin/python bench/ttff_bench.py --size 416x224 --sessions 10 --settle 15
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from studio.server.background import free_port  # noqa: E402
from webrtc.client import StudioViewer  # noqa: E402
from webrtc_bench import start_server  # noqa: E402


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
        while (await http.get(f"{url}/api/sessions")).json():
            if time.monotonic() > deadline:
                raise SystemExit("a closed session was not freed within 30 s")
            await asyncio.sleep(0.05)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", default="416x224")
    parser.add_argument("--sessions", type=int, default=10)
    parser.add_argument("--settle", type=float, default=15.0)
    parser.add_argument("--json", type=Path, help="also write the result here")
    args = parser.parse_args()
    port = free_port()
    server = start_server(port, 1, "reference")
    try:
        time.sleep(args.settle)
        ms = asyncio.run(sessions(f"http://127.0.0.1:{port}", args.size, args.sessions))
    finally:
        server.terminate()
        server.wait(15)
    result = {"size": args.size, "sessions": len(ms), "ttff_ms": [round(m) for m in ms],
              "median_ms": round(statistics.median(ms)), "worst_ms": round(max(ms))}
    print(json.dumps(result))
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
