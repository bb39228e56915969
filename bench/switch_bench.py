"""Switch-to-screen latency: from a prompt switch leaving its sender to the first picture on screen in the new style.

Starts `python app.py` as a subprocess, connects one aiortc viewer with the frame stamp on and, after a warm-up,
sends `--switches` cuts between two presets from the owner's data channel (a page's click sends the same message),
each at a random moment of the stream (0.6–1.2 s apart, so they fall anywhere within a chunk). Every frame's
status says which frame it is and what conditioning it was rendered with, so the first frame of the new style is
known exactly: it is the first decoded picture whose stamp names a frame whose status carries the new label.

Definitions (one machine, one clock):
  switch → screen   the switch message sent (wall clock) → that first new picture decoded at the viewer
  glass-to-glass    the server started rendering the chunk of frame k → the viewer decoded the picture stamped k
                    (as bench/webrtc_bench.py), over the same run
  frame_ms          one frame period at the stream's rate
  beat error        with --bpm: the session gets that tempo (a downbeat when it is sent) and every switch is
                    quantized to the next beat; how far the first new picture's decode lands from the nearest
                    beat, in frame periods (signed: late is positive). The viewer first tells the studio its
                    sent → decoded delay (`screen_delay`, the median over the warm-up, as the studio page does),
                    and the studio places each switch on the frame it sends that much before the beat.

    python -m bench.switch_bench --size 416x224 --switches 30
    python -m bench.switch_bench --size 416x224 --switches 30 --bpm 120
    python -m bench.switch_bench --size 416x224 --switches 30 --renderer flash --renderer-option num_steps=1
    python -m bench.switch_bench --size 416x224 --switches 30 --cluster local      # rendered on a Ray worker

`--osc-ahead MS` sends each switch as an OSC bundle instead (`/alaya/preset`, the viewer's session bound with the
admin token), timetagged MS ahead of its sending, and reports how far its first new picture lands from that time
(`timetag_error_p50_frames`, `timetag_error_p95_frames`; the viewer tells its screen delay first, as with --bpm).

    python -m bench.switch_bench --size 416x224 --switches 30 --osc-ahead 200

`--browser` measures the same in Chromium, with the studio page's own timing (bench/switch_browser.py): a tile
click → the expected display time of the first picture in the new style. `--transition N` times the first
frame of an N-frame blend instead of a cut (the first picture whose conditioning differs from the one playing).

    python -m bench.switch_bench --size 416x224 --switches 30 --browser [--bpm 120] [--transition 16]
"""

from __future__ import annotations

import asyncio
import json
import random
import statistics
import sys
import time


from bench.harness import parser, studio, write_json
from bench.switch_figures import figures
from bench.webrtc_bench import latencies_ms
from webrtc.client import StudioViewer
from webrtc.protocol import MAX_SWITCH_FRAMES

PRESETS = ("volcano", "polar")


def screen_delay_ms(viewer: StudioViewer, since: float) -> float | None:
    """The median delay from a frame leaving the studio's pacing (its status: rendered_wall + latency_ms) to its
    decode here, over the frames received since `since`; None without stamped frames."""
    sent = {m["frame"] % 65536: m["rendered_wall"] + m["latency_ms"] / 1e3 for m in viewer.statuses()
            if "rendered_wall" in m and "latency_ms" in m}
    delays = [(f.received_at - sent[f.stamp]) * 1e3 for f in viewer.frames
              if f.received_at >= since and f.stamp in sent]
    return statistics.median(delays) if delays else None


def first_new_picture(viewer: StudioViewer, before: str | None, sent_at: float) -> float | None:
    """When the viewer decoded the first picture rendered with another conditioning than `before` (the label
    playing when the switch was sent: a cut's new preset, or a blend's first mixed frame), among frames received
    after `sent_at`."""
    labels = {m["frame"] % 65536: m["label"] for m in viewer.statuses()}
    for frame in viewer.frames:
        label = labels.get(frame.stamp)
        if frame.received_at >= sent_at and label is not None and label != before:
            return frame.received_at
    return None


OSC_TOKEN = "switch-bench-admin"          # the studio's admin token in this bench: binds OSC to the viewer


def osc_bundle(preset: str, due: float) -> bytes:
    """`/alaya/preset PRESET` in a bundle timetagged `due` (Unix seconds)."""
    from pythonosc.osc_bundle_builder import OscBundleBuilder
    from pythonosc.osc_message_builder import OscMessageBuilder

    bundle, message = OscBundleBuilder(due), OscMessageBuilder("/alaya/preset")
    message.add_arg(preset)
    bundle.add_content(message.build())
    return bundle.build().dgram


async def measure(url: str, size: str, switches: int, fps: float, warmup: float, seed: int,
                  bpm: float | None = None, transition: int = 0, lead_on: bool = True,
                  osc: tuple[int, float] | None = None) -> dict:
    """`osc`: (the studio's OSC port, ms ahead): each switch an OSC bundle timetagged that far ahead."""
    rng = random.Random(seed)
    latencies, beat_errors = [], []
    async with StudioViewer(url, source="demo", size=size, fps=fps, stamp=True, keep_pixels=False) as viewer:
        await viewer.wait_frames(1, timeout=120)
        await asyncio.sleep(warmup)
        anchor, lead = None, None
        if osc is not None:
            import socket

            import httpx

            lead = screen_delay_ms(viewer, time.time() - warmup) if lead_on else None
            if lead is not None:
                await viewer.send({"type": "screen_delay", "ms": round(lead, 1)})
            async with httpx.AsyncClient(base_url=url, timeout=30) as http:
                bound = await http.put("/api/osc", json={"session_id": viewer.session_id},
                                       headers={"Authorization": f"Bearer {OSC_TOKEN}"})
                bound.raise_for_status()
            udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            if transition:
                from pythonosc.osc_message_builder import OscMessageBuilder

                message = OscMessageBuilder("/alaya/transition")
                message.add_arg(transition)
                udp.sendto(message.build().dgram, ("127.0.0.1", osc[0]))
        if bpm is not None:
            # as the studio page does (latency.js): tell the studio this viewer's sent → decoded delay, which it
            # places quantized switches ahead by
            lead = screen_delay_ms(viewer, time.time() - warmup) if lead_on else None
            if lead is not None:
                await viewer.send({"type": "screen_delay", "ms": round(lead, 1)})
            mark = len(viewer.messages)
            anchor = time.time()                 # the studio's downbeat: when it reads this, a millisecond on
            await viewer.send({"type": "tempo", "bpm": bpm})
            await viewer.wait_message("ack", after=mark, request="tempo")
        t0 = time.time()
        for i in range(switches):
            await asyncio.sleep(rng.uniform(0.6, 1.2))
            preset = PRESETS[i % 2]
            before = next((m["label"] for m in reversed(viewer.statuses())), None)
            sent_at = time.time()
            switch = {"type": "preset", "name": preset, "transition": transition}
            if osc is not None:
                mark = len(viewer.messages)
                due = sent_at + osc[1] / 1e3
                udp.sendto(osc_bundle(preset, due), ("127.0.0.1", osc[0]))
            else:
                mark = await viewer.send({**switch, "quantize": "beat"} if bpm is not None else switch)
            await viewer.wait_message("ack", after=mark, request="preset")
            await viewer.wait_until(lambda b=before, t=sent_at: first_new_picture(viewer, b, t) is not None, 30,
                                    f"the first picture after switching to {preset}")
            shown = first_new_picture(viewer, before, sent_at)
            latencies.append((shown - sent_at) * 1e3)
            if bpm is not None and anchor is not None:
                period = 60.0 / bpm
                beat = anchor + round((shown - anchor) / period) * period
                beat_errors.append((shown - beat) * fps)
            elif osc is not None:
                beat_errors.append((shown - due) * fps)
        g2g = latencies_ms(viewer, t0)
        chunk = next((m["chunk_size"] for m in reversed(viewer.statuses())), None)
    return {"size": size, "switches": switches, "target_fps": fps, "chunk_size": chunk, "transition": transition,
            **({"screen_delay_ms": round(lead, 1)} if lead is not None else {}),
            **({"osc_ahead_ms": osc[1]} if osc is not None else {}),
            **figures(latencies, g2g, fps, bpm, beat_errors, "timetag" if osc is not None else "beat")}


def main() -> int:
    ap = parser(__doc__, full_help=True)
    ap.add_argument("--size", default="416x224")
    ap.add_argument("--switches", type=int, default=30)
    ap.add_argument("--fps", type=float, default=30.0)
    ap.add_argument("--renderer", default="reference")
    ap.add_argument("--renderer-option", action="append", default=[], metavar="KEY=VALUE")
    ap.add_argument("--weights", help="weights directory for --renderer flash (e.g. a trained nano)")
    ap.add_argument("--warmup", type=float, default=3.0)
    ap.add_argument("--seed", type=int, default=0, help="the switches' random moments")
    ap.add_argument("--bpm", type=float, help="quantize every switch to the beat of this tempo")
    ap.add_argument("--no-screen-delay", action="store_true",
                    help="with --bpm: never tell the studio the viewer's screen delay (the switch leaves the studio "
                    "on the beat instead of reaching the screen on it): the control for what the lead buys")
    ap.add_argument("--browser", action="store_true", help="measure in Chromium with the studio page's own timing")
    ap.add_argument("--cluster", metavar="ADDRESS",
                    help="serve with --cluster ADDRESS and one render worker on Ray (local: start Ray here)")
    ap.add_argument("--osc-ahead", type=float, metavar="MS",
                    help="each switch an OSC bundle timetagged MS ahead (aiortc viewer; not with --bpm)")
    ap.add_argument("--transition", type=int, default=0, metavar="N",
                    help="switch with an N-frame blend and time its first frame (default 0: a cut)")
    args = ap.parse_args()
    if not 0 <= args.transition <= MAX_SWITCH_FRAMES:
        print(f"error: --transition {args.transition} is not within 0..{MAX_SWITCH_FRAMES} frames", file=sys.stderr)
        return 2
    if args.bpm is not None and not 20 <= args.bpm <= 300:
        print(f"error: --bpm {args.bpm:g} is not within 20..300", file=sys.stderr)
        return 2
    if args.osc_ahead is not None and (args.browser or args.bpm is not None or not 0 <= args.osc_ahead <= 10000):
        print("error: --osc-ahead takes 0..10000 ms, with the aiortc viewer and without --bpm", file=sys.stderr)
        return 2
    options = [a for o in args.renderer_option for a in ("--renderer-option", o)]
    options += ["--weights", args.weights] if args.weights else []
    options += ["--cluster", args.cluster, "--workers", "1"] if args.cluster else []
    osc = None
    if args.osc_ahead is not None:
        import socket

        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:      # a free UDP port for the studio's OSC
            probe.bind(("127.0.0.1", 0))
            osc = (probe.getsockname()[1], args.osc_ahead)
        options += ["--osc-port", str(osc[0]), "--admin-token", OSC_TOKEN]
    with studio(1, args.renderer, options) as st:
        if args.browser:
            from bench.switch_browser import measure_in_chromium

            result = measure_in_chromium(st.url, args.size, args.switches, args.fps, args.warmup, args.seed,
                                         args.bpm, args.transition, not args.no_screen_delay)
        else:
            result = asyncio.run(measure(st.url, args.size, args.switches, args.fps, args.warmup, args.seed,
                                         args.bpm, args.transition, not args.no_screen_delay, osc))
    viewer = "chromium" if args.browser else "aiortc"
    result = {"renderer": args.renderer, "renderer_options": args.renderer_option, "viewer": viewer,
              **({"cluster": args.cluster} if args.cluster else {}), **result}
    print(json.dumps(result))
    write_json(args.json, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
