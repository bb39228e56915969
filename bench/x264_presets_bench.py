"""x264 presets for live sessions: encode time per frame and picture quality at the session's own settings.

    python -m bench.x264_presets_bench [--sizes 416x224 832x448] [--frames 90] [--presets veryfast,superfast,ultrafast]

Renders real engine frames with the reference renderer (the report styles, 30 frames each), then encodes them
with libx264 opened as a live session opens it (`webrtc.encoders.open_h264`, at the bitrate
`EncoderSettings.for_session` picks), one preset at a time, twice, alternated. Prints the median encode time,
the mean PSNR of the decoded pictures against the rendered ones, and the bitrate reached.
"""

from __future__ import annotations

import argparse
import os
import time
from dataclasses import replace

import av
import numpy as np

from gbuffer.formats.pictures import rgb24, yuv420p
from prompt_presets import REPORT_STYLES, conditioning_for
from bench.reference_bench import load_frames
from renderer.reference import ReferenceRenderer
from webrtc.encoders import EncoderSettings, open_h264

os.environ.setdefault("EGL_PLATFORM", "surfaceless")


def rendered(width: int, height: int, count: int) -> list[np.ndarray]:
    session = ReferenceRenderer(None).open_session(width, height)
    styles = [conditioning_for(REPORT_STYLES[(i // 30) % len(REPORT_STYLES)]) for i in range(count)]
    return [session.render([f], [c]).rgb[0] for f, c in zip(load_frames("engine", width, height, count), styles)]


def encode(pictures: list[np.ndarray], preset: str) -> dict:
    h, w, _ = pictures[0].shape
    settings = replace(EncoderSettings.for_session(w, h, 30.0), h264_preset=preset)
    enc = open_h264(w, h, settings.bitrate, settings)
    dec = av.CodecContext.create("h264", "r")
    ms, psnr, bits = [], [], 0
    for i, picture in enumerate(pictures):
        frame = yuv420p(picture)
        frame.pts = i
        t0 = time.perf_counter()
        packets = enc.encode(frame)
        ms.append((time.perf_counter() - t0) * 1e3)
        for packet in packets:    # zerolatency: frame i comes out as frame i's packet
            bits += packet.size * 8
            for out in dec.decode(packet):
                err = ((rgb24(out).astype(np.float64) - picture) ** 2).mean()
                psnr.append(10 * np.log10(255 ** 2 / max(err, 1e-9)))
    return {"preset": preset, "encode_ms_median": float(np.median(ms)), "psnr_db": float(np.mean(psnr)),
            "mbps": bits / len(pictures) * 30 / 1e6}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", nargs="+", default=["416x224", "832x448"])
    ap.add_argument("--frames", type=int, default=90)
    ap.add_argument("--presets", default="veryfast,superfast,ultrafast")
    args = ap.parse_args()
    print(f"{'size':>9} {'preset':>10} {'encode ms':>10} {'PSNR dB':>8} {'Mbit/s':>7}")
    for size in args.sizes:
        w, h = (int(v) for v in size.lower().split("x"))
        pictures = rendered(w, h, args.frames)
        runs = [encode(pictures, p) for _ in range(2) for p in args.presets.split(",")]
        for preset in args.presets.split(","):
            mine = [r for r in runs if r["preset"] == preset]
            print(f"{size:>9} {preset:>10} {np.median([r['encode_ms_median'] for r in mine]):10.2f} "
                  f"{mine[0]['psnr_db']:8.2f} {mine[0]['mbps']:7.2f}")


if __name__ == "__main__":
    main()
