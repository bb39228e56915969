"""Glass-to-glass latency in Chromium, measured by the studio page itself (studio/ui/static/latency.js).

Starts `python app.py` as a subprocess, opens the studio page in headless Chromium on the built-in engine,
turns on "measure glass-to-glass", waits `--warmup` seconds and collects every sample for `--seconds`.

Definition (the page's): the server starts rendering frame k (its wall clock, `rendered_wall` in the status
message) → Chromium's expected display time of the picture stamped k (requestVideoFrameCallback's
`expectedDisplayTime`, with the stamp read back from that picture), on the server's clock via the page's
ping/pong offset. So it covers render, hand-over, pacing, encode, send, the jitter buffer, decode and the
compositor's next vsync. The breakdown (medians per stage) splits it: take (the chunk's frames from the
source: the built-in engine renders them), render (until this frame was rendered and handed over), wait (the
hand-over and pacing until the frame goes to the encoder: a chunk's later frames wait for their turn), encode
(the previous frame's, as the status reports it), network (send, packetisation, loopback, until Chromium has
the last packet), decode (Chromium's processingDuration), display (jitter buffer and the wait for the compositor).

With `--drive N` it then measures drive input → photon: the page takes the wheel (a click on the picture), and
N times presses and releases the left arrow (half a second each). Each key event counts from the moment the page
sent it (its clock) to the expected display time of the first picture whose frame was driven with that control
(steer -1 while held, 0 once released; the engine reports each frame's control in its status message).

    python -m bench.browser_latency_bench --size 416x224 --seconds 10 --playout now,browser,now,browser
    python -m bench.browser_latency_bench --size 416x224 --seconds 10 --drive 20
    python -m bench.browser_latency_bench --renderer flash --weights NANO_DIR --size 160x96   # the neural path
"""

from __future__ import annotations

import json
import os
import sys
import time

import numpy as np

from bench.harness import parser, studio, studio_page, write_json

STAGES = ("take", "render", "wait", "encode", "network", "decode", "display")   # latency.js stages()


def wait_for(page, script: str, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = page.evaluate(script)
        if value:
            return value
        time.sleep(0.1)
    raise SystemExit(f"timed out waiting for {what}")


def drive_latencies(page, trials: int) -> list[float]:
    """Key event → first picture on screen driven with it, in ms, for `trials` presses and as many releases."""
    page.click("#alaya-video")
    for _ in range(trials + 1):          # the first press takes the wheel from the autopilot: not counted
        page.keyboard.down("ArrowLeft")
        time.sleep(0.5)
        page.keyboard.up("ArrowLeft")
        time.sleep(0.5)
    keys = page.evaluate("window.alayaStudio.keyLog.slice()")[2:]
    shown = page.evaluate("window.alayaStudio.presentedLog.slice()")
    out = []
    for key in keys:
        wanted = -1.0 if key["down"] else 0.0
        first = next((s for s in shown if s["at"] > key["at"] and (s.get("control") or {}).get("steer") == wanted),
                     None)
        if first is not None:
            out.append(first["at"] - key["at"])
    return out


def measure(url: str, size: str, playout: str, warmup: float, seconds: float, drive: int) -> dict:
    with studio_page(f"{url}/?size={size}&playout={playout}") as page:
        wait_for(page, "window.alayaStudio && window.alayaStudio.lastStatus", 120, "the first frame")
        page.check("#alaya-measure")
        wait_for(page, "(window.alayaStudio.latencyNow || {}).samples > 5", 60, "stamped frames")
        time.sleep(warmup)
        page.evaluate("window.alayaStudio.g2gLog = []")
        sent0 = page.evaluate("window.alayaStudio.lastStatus.frame")
        time.sleep(seconds)
        samples = page.evaluate("window.alayaStudio.g2gLog.slice()")
        sent1 = page.evaluate("window.alayaStudio.lastStatus.frame")
        server_ms = page.evaluate("window.alayaStudio.lastStatus.latency_ms")
        offset = page.evaluate("window.alayaStudio.clockOffset()")
        shown = page.evaluate("window.alayaStudio.presentedLog.filter((p) => p.stages).map((p) => p.stages)")
        drive_ms = np.asarray(drive_latencies(page, drive), float) if drive else None
    g2g = np.asarray(samples, float)
    return {"size": size, "playout": playout, "seconds": seconds, "samples": len(g2g),
            "presented_fps": round(len(g2g) / seconds, 1), "sent_fps": round((sent1 - sent0) / seconds, 1),
            "g2g_p50_ms": round(float(np.percentile(g2g, 50)), 1),
            "g2g_p95_ms": round(float(np.percentile(g2g, 95)), 1),
            "g2g_max_ms": round(float(g2g.max()), 1), "server_latency_ms_last": server_ms,
            "stages_p50_ms": {k: round(float(np.median([s[k] for s in shown])), 1) for k in STAGES} if shown else None,
            "clock_offset_ms": round(offset, 2), "cpus": os.cpu_count(), "load_average": round(os.getloadavg()[0], 2),
            **({"drive_events": len(drive_ms), "drive_p50_ms": round(float(np.percentile(drive_ms, 50)), 1),
                "drive_p95_ms": round(float(np.percentile(drive_ms, 95)), 1)} if drive else {})}


def main() -> int:
    ap = parser(__doc__, full_help=True)
    ap.add_argument("--size", default="416x224")
    ap.add_argument("--warmup", type=float, default=3.0)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--playout", default="now",
                        help="comma list: now (jitterBufferTarget 0, the page's default), browser (Chromium's own)")
    ap.add_argument("--drive", type=int, default=0, metavar="N", help="also N key presses: input → photon")
    ap.add_argument("--renderer", default="reference", help="the server's --renderer (flash needs --weights)")
    ap.add_argument("--weights", help="the server's --weights: a flash weights directory")
    ap.add_argument("--renderer-option", action="append", default=[], metavar="KEY=VALUE",
                    help="passed to the server, e.g. threads=1 for the flash renderer")
    args = ap.parse_args()
    options = [a for o in args.renderer_option for a in ("--renderer-option", o)]
    options += ["--weights", args.weights] if args.weights else []
    with studio(2, args.renderer, options) as st:
        result = [measure(st.url, args.size, p, args.warmup, args.seconds, args.drive) for p in args.playout.split(",")]
    for row in result:
        print(json.dumps(row))
    write_json(args.json, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
