"""Issue 42's memory probe for engine feeds: 20 feeds connect to a studio (its own process, `serve`) and each
sends one 1080p frame; the studio's RSS is sampled every 5 ms, and reported at its peak and once the feeds have
gone, for each --max-feeds given (a large cap stands for the studio before feeds were capped).

    python -m bench.feed_memory_bench --max-feeds 4,100 [--feeds 20] [--json out.json]
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
import time

import httpx
import numpy as np
import psutil
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

from bench.harness import parser, write_json
from gbuffer.feed import Hello, encode_frame
from gbuffer.frame import GBufferFrame


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def send_one(url: str, name: str, frame: bytes) -> None:
    try:
        with connect(url, max_size=None, open_timeout=30) as ws:
            ws.send(Hello(name, 1920, 1080, 30.0).to_json())
            ws.recv(timeout=30)
            ws.send(frame)
            ws.recv(timeout=2)
    except (ConnectionClosed, TimeoutError, OSError):
        pass


def probe(max_feeds: int, feeds: int, frame: bytes) -> dict:
    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "studio.cli", "serve", "--port", str(port),
                               "--max-feeds", str(max_feeds)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/api/health", timeout=2).json().get("ready"):
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        proc = psutil.Process(server.pid)
        time.sleep(1.0)                               # let start-up's allocations settle before the baseline
        before = proc.memory_info().rss
        peak, stop = [before], threading.Event()

        def watch() -> None:
            while not stop.is_set():
                peak[0] = max(peak[0], proc.memory_info().rss)
                stop.wait(0.005)

        watcher = threading.Thread(target=watch, daemon=True)
        watcher.start()
        url = f"ws://127.0.0.1:{port}/api/engine/feed"
        threads = [threading.Thread(target=send_one, args=(url, f"big{i}", frame)) for i in range(feeds)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        time.sleep(2.0)                               # the feeds' closes handled, their frames released
        settled = proc.memory_info().rss
        stop.set()
        watcher.join()
        return {"max_feeds": max_feeds, "feeds": feeds, "peak_mb": round((peak[0] - before) / 2**20, 1),
                "settled_mb": round((settled - before) / 2**20, 1)}
    finally:
        server.terminate()
        server.wait(30)


def main() -> None:
    ap = parser(__doc__)
    ap.add_argument("--max-feeds", default="4,100")
    ap.add_argument("--feeds", type=int, default=20)
    args = ap.parse_args()
    pixels = np.random.default_rng(0).integers(0, 256, (5, 1080, 1920, 3), np.uint8)
    frame = encode_frame(GBufferFrame(0, 0.0, pixels))
    rows = [probe(int(n), args.feeds, frame) for n in args.max_feeds.split(",")]
    for row in rows:
        print(json.dumps(row))
    write_json(args.json, {"rows": rows})


if __name__ == "__main__":
    main()
