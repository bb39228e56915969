"""The return path's round trip (issue 27): G-buffer frame sent by an engine → its styled frame received back.

    python -m bench.engine_roundtrip_bench --transport ws|grpc --engines 1 --size 416x224 [--frames 300] [--fps 30]
                                           [--in-flight 2] [--format rgb24|jpeg] [--warmup 30] [--json FILE]

A studio subprocess with the reference renderer; each engine (a thread here) connects over the transport, asks
for its own session (feed protocol 2 over WebSocket; `Open.output` over gRPC, with `serve --grpc-port`), sends synthetic
G-buffer frames at --fps (0: one frame in flight, the next sent when the last is back; with --fps, a tick is skipped
while --in-flight frames are on their way) and times each styled frame's return on its receiving thread.
Per engine: round-trip p50/p95, the styled frames received per second, the renderer's own time per frame (from
each frame's header), the time in the studio (frame read off the socket → styled frame ready to go back, render
included, also from the header) and `overhead_p50_ms`, the round trip's median minus the render's: what the
return path adds (goal: at most 10 ms); the round trip minus the studio's time is the wire's share. The load
average before and after is printed: the figures are only as quiet as the machine.

Transports are a table (TRANSPORTS): a name → the studio's extra flags (given a free port for a listener of the
transport's own) and a function that connects one engine and returns a client with `send_frame(GBufferFrame)`,
`roundtrips` (gbuffer.feed.roundtrip.RoundTrips: `sent` before each send, `arrived` per styled frame) and
`close()`.
"""

from __future__ import annotations

import contextlib
import json
import os
import statistics
import threading
import time
from dataclasses import dataclass
from typing import Callable, Sequence

from bench.harness import Studio, free_port, parser, print_table, size, studio, synthetic_frames, write_json


@dataclass(frozen=True)
class Transport:
    # the studio's extra flags to serve it, given a free port for a listener of its own (gRPC's)
    server_args: Callable[[int], Sequence[str]]
    connect: Callable[..., object]   # (studio, that port, name, width, height, fps, output) → a connected client


def websocket_engine(studio: Studio, _port: int, name: str, width: int, height: int, fps: float, output: dict):
    from gbuffer.feed.client import FeedClient

    ws_url = studio.url.replace("http://", "ws://") + "/api/engine/feed"
    client = FeedClient(ws_url, name=name, width=width, height=height, fps=fps or 120, compression="none",
                        output=output)
    client.connect()
    return client


def grpc_engine(studio: Studio, port: int, name: str, width: int, height: int, fps: float, output: dict):
    """The engine feed over gRPC (`serve --grpc-port`, the `engines` extra; docs/engines.md)."""
    from gbuffer.feed.grpc.client import GrpcFeedClient

    client = GrpcFeedClient(f"127.0.0.1:{port}", name=name, width=width, height=height, fps=fps or 120,
                            compression="none", output=output)
    client.connect()
    return client


TRANSPORTS: dict[str, Transport] = {"ws": Transport(lambda _port: (), websocket_engine),
                                    "grpc": Transport(lambda port: ("--grpc-port", str(port)), grpc_engine)}


def drive(client, frames: Sequence, count: int, fps: float, in_flight: int, first_index: int = 0) -> tuple[float, int]:
    """Send `count` frames (cycling `frames`, numbered from `first_index`) at `fps`, or one in flight with
    fps 0; → (seconds from the first send to the last styled frame back, frames skipped). A paced engine skips a
    tick while `in_flight` frames are on their way (0: never): what a game in the loop does rather than queue
    frames in the socket it could no longer use."""
    from gbuffer.frame import GBufferFrame

    start = time.perf_counter()
    last, skipped, index = first_index + count - 1, 0, first_index - 1
    for k in range(count):
        trips = client.roundtrips
        if fps and in_flight and k < count - 1 and trips.last_index is not None and \
                index - trips.last_index >= in_flight:
            skipped += 1
        else:
            index = first_index + k
            client.send_frame(GBufferFrame(index, index / 30, frames[k % len(frames)].data))
        if fps:
            delay = start + (k + 1) / fps - time.perf_counter()
            if delay > 0:
                time.sleep(delay)
        else:
            client.roundtrips.wait_for(index, 30)
    client.roundtrips.wait_for(last, 30)
    return time.perf_counter() - start, skipped


def run_engine(transport: Transport, studio_: Studio, port: int, name: str, args, out: dict) -> None:
    from gbuffer.feed.roundtrip import RoundTrips

    w, h = size(args.size)
    frames = synthetic_frames(30, w, h)
    client = transport.connect(studio_, port, name, w, h, args.fps, {"format": args.format})
    try:
        drive(client, frames, args.warmup, args.fps, args.in_flight)     # first frames: the renderer warms up
        client.roundtrips = RoundTrips()
        seconds, skipped = drive(client, frames, args.frames, args.fps, args.in_flight, first_index=args.warmup)
        figures = client.roundtrips.summary()
    finally:
        client.close()
    render, in_studio = figures.pop("render_p50_ms"), figures.pop("studio_p50_ms")
    trip = figures["roundtrip_p50_ms"]
    out[name] = {"engine": name, "frames_skipped": skipped, **figures, "render_p50_ms": render,
                 "studio_p50_ms": in_studio,
                 "overhead_p50_ms": round(trip - render, 2) if trip is not None and render is not None else None,
                 "fps_received": round(figures["frames_received"] / seconds, 2)}


def measure(transport_name: str, engines: int, args) -> list[dict]:
    transport = TRANSPORTS[transport_name]
    port = free_port()
    with studio(max_sessions=engines, renderer="reference", extra=transport.server_args(port)) as s:
        out: dict[str, dict] = {}
        threads = [threading.Thread(target=run_engine, args=(transport, s, port, f"bench{i}", args, out))
                   for i in range(engines)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    if len(out) != engines:
        raise SystemExit(f"{engines - len(out)} engine(s) failed; see above")
    return [{"transport": transport_name, "engines": engines, "size": args.size, "fps_sent": args.fps or "lockstep",
             "format": args.format, "in_flight": args.in_flight if args.fps else 1, **row} for row in out.values()]


def main() -> None:
    ap = parser(__doc__, full_help=True)
    ap.add_argument("--transport", choices=sorted(TRANSPORTS), default="ws")
    ap.add_argument("--engines", type=int, default=1)
    ap.add_argument("--size", default="416x224")
    ap.add_argument("--frames", type=int, default=300, help="frames timed per engine")
    ap.add_argument("--warmup", type=int, default=30, help="frames sent first, not timed")
    ap.add_argument("--fps", type=float, default=30.0, help="the engines' send rate; 0: one frame in flight")
    ap.add_argument("--format", choices=("rgb24", "jpeg"), default="rgb24")
    ap.add_argument("--in-flight", type=int, default=2, help="with --fps: skip a tick while this many frames are "
                    "on their way (0: send every tick, and let the socket queue)")
    args = ap.parse_args()
    print(f"load average before: {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs", flush=True)
    rows = measure(args.transport, args.engines, args)
    print_table(rows, [("transport", "transport"), ("engines", "engines"), ("engine", "engine"),
                       ("sent fps", "fps_sent"), ("recv fps", "fps_received"), ("rt p50", "roundtrip_p50_ms"),
                       ("rt p95", "roundtrip_p95_ms"), ("render p50", "render_p50_ms"), ("studio p50", "studio_p50_ms"),
                       ("overhead p50", "overhead_p50_ms"), ("missed", "frames_missed"),
                       ("skipped", "frames_skipped")])
    for row in rows:
        print(json.dumps(row), flush=True)
    if len(rows) > 1:
        print(json.dumps({"overhead_p50_ms_median": statistics.median(r["overhead_p50_ms"] for r in rows)}))
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    write_json(args.json, rows)


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        main()
