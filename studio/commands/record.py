"""`alaya-studio record`: record G-buffer frames from the built-in engine to `.gbuf.zip` or `.npy` windows.

    alaya-studio record --engine demo --frames 640 -o demo.gbuf.zip [--size 832x448] [--fps 30] [--seed 0] [--rgb]

An output ending in `/` (or naming an existing directory) gets official `window-NN.npy` files instead.
`--rgb` also records the engine's beauty pass (its own lit image) beside the G-buffer: paired data for
`alaya-studio train` (the `rgb/` stream of a .gbuf.zip, `window-NN.rgb.npy` beside each window).
"""

from __future__ import annotations

import os
import sys
from itertools import islice
from pathlib import Path

from gbuffer.size import Size
from studio.commands._args import ArgumentError

ENGINES = ("demo",)


def register(sub) -> None:
    p = sub.add_parser("record", help="record G-buffer frames from the built-in engine",
                       description=__doc__.split("\n\n")[0])
    p.add_argument("--engine", default="demo", help=f"engine to record: {', '.join(ENGINES)} (autopilot laps)")
    p.add_argument("--frames", type=int, required=True, help="number of frames to record")
    p.add_argument("-o", "--output", required=True,
                   help="FILE.gbuf.zip, or a directory (ending in /) for official .npy windows")
    p.add_argument("--size", default="832x448", help="WIDTHxHEIGHT (default 832x448)")
    p.add_argument("--fps", type=float, default=30.0, help="frames per second of the recording (default 30)")
    p.add_argument("--seed", type=int, default=0, help="world seed (default 0)")
    p.add_argument("--rgb", action="store_true",
                   help="also record the engine's lit beauty pass beside the G-buffer (paired training data)")
    p.set_defaults(func=run)


def _output_kind(output: str) -> tuple[str, Path]:
    """('npy', dir) or ('gbuf', file); checks the place is writable before any frame is rendered."""
    path = Path(output)
    if output.endswith(("/", os.sep)) or path.is_dir():
        try:
            path.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ArgumentError(f"cannot create directory {output!r}: {exc.strerror}", "-o") from None
        if not os.access(path, os.W_OK):
            raise ArgumentError(f"directory {output!r} is not writable", "-o")
        return "npy", path
    if not output.endswith(".gbuf.zip"):
        raise ArgumentError(f"output {output!r} must end with .gbuf.zip, or name a directory for .npy windows",
                            "-o")
    parent = path.parent if str(path.parent) else Path(".")
    if not parent.is_dir():
        raise ArgumentError(f"directory {str(parent)!r} for {output!r} does not exist", "-o")
    if not os.access(parent, os.W_OK) or (path.exists() and not os.access(path, os.W_OK)):
        raise ArgumentError(f"cannot write {output!r}: permission denied", "-o")
    return "gbuf", path


def run(args) -> int:
    from tqdm import tqdm

    from gbuffer.engine import EngineSource
    from gbuffer.formats import GbufZipWriter, write_npy_windows

    if args.engine not in ENGINES:
        raise ArgumentError(f"unknown engine {args.engine!r}; available: {', '.join(ENGINES)}", "--engine")
    if args.frames <= 0:
        raise ArgumentError(f"must be a positive number of frames, got {args.frames}", "--frames")
    if not 0 < args.fps <= 60:
        raise ArgumentError(f"must be above 0 and at most 60, got {args.fps:g}", "--fps")
    width, height = Size.parse(args.size, "--size")
    engine = EngineSource.demo(width, height, fps=args.fps, seed=args.seed, rgb=args.rgb)  # checks the seed
    kind, path = _output_kind(args.output)

    source_name = f"engine:{args.engine} seed={args.seed}"
    with engine:
        frames = tqdm(islice(engine, args.frames), total=args.frames, unit="frame", file=sys.stderr,
                      desc="recording", dynamic_ncols=True)
        if kind == "npy":
            written = write_npy_windows(frames, path)
            print(f"wrote {args.frames} frames to {len(written)} window file(s) in {path}", file=sys.stderr)
        else:
            metadata = {"engine": args.engine, "seed": args.seed, "autopilot": True, "rgb": args.rgb}
            with GbufZipWriter(path, fps=args.fps, source=source_name, metadata=metadata) as writer:
                for frame in frames:
                    writer.write(frame)
            print(f"wrote {args.frames} frames to {path}", file=sys.stderr)
    return 0


