"""Offline render throughput: `alaya-studio render` end to end (source → reference renderer → H.264 MP4).

Runs the built-in engine on autopilot (live source) and a recorded .gbuf.zip of the same frames, at 416x224 and
832x448, and prints frames per second with the per-stage medians from the metrics JSON.

    python -m bench.offline_bench [--frames 120] [--backends gl,torch] [--json out.json]
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from bench.harness import parser, write_json
from studio.cli import main as cli

SIZES = ("416x224", "832x448")


def run(frames: int, backends: list[str]) -> list[dict]:
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for size in SIZES:
            rec = Path(tmp) / f"rec-{size}.gbuf.zip"
            assert cli(["record", "--engine", "demo", "--frames", str(frames), "--size", size, "-o", str(rec)]) == 0
            for name, inputs in (("demo (live engine)", ["demo"]), (".gbuf.zip", [str(rec)])):
                for backend in backends:
                    metrics = Path(tmp) / "m.json"
                    argv = ["render", *inputs, "--schedule", "eight-worlds", "--frames", str(frames), "--size", size,
                            "-o", str(Path(tmp) / "out.mp4"), "--metrics", str(metrics), "--no-progress",
                            "--renderer-option", f"backend={backend}"]
                    assert cli(argv) == 0
                    m = json.loads(metrics.read_text())
                    rows.append({"input": name, "backend": backend, "size": size, "frames": m["frames"],
                                 "fps": round(m["fps"], 2), "stage_ms_median": m["stage_ms_median"],
                                 "encode_ms_median": m["encode_ms_median"]})
    return rows


def main() -> None:
    ap = parser(__doc__)
    ap.add_argument("--frames", type=int, default=120)
    ap.add_argument("--backends", default="gl,torch", help="the reference renderer's backends to run, in turn")
    args = ap.parse_args()
    rows = run(args.frames, args.backends.split(","))
    print(f"{'input':<20} {'backend':>7} {'size':>8} {'frames':>6} {'FPS':>7}  stage ms (median per frame)")
    for r in rows:
        stages = ", ".join(f"{k} {v:.1f}" for k, v in r["stage_ms_median"].items())
        print(f"{r['input']:<20} {r['backend']:>7} {r['size']:>8} {r['frames']:>6} {r['fps']:>7.2f}  {stages}; "
              f"encode {r['encode_ms_median']:.1f}")
    write_json(args.json, {"benchmark": "offline_render", "rows": rows})


if __name__ == "__main__":
    main()
