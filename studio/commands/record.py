"""`alaya-studio record`: record G-buffer frames from the built-in engine, or a Blender scene, to `.gbuf.zip`.

    alaya-studio record --engine demo --frames 640 -o demo.gbuf.zip [--size 832x448] [--fps 30] [--seed 0] [--rgb]
    alaya-studio record --engine panda3d --rgb --seed N --frames 640 -o drive.gbuf.zip [--size 416x224]
    alaya-studio record --blender SCENE.blend [--frames A:B] [--camera NAME] [--engine cycles|eevee] [--samples N]
                        -o OUT.gbuf.zip

A Blender scene renders its animation through bpy (the `engines` extra) with the combined pass as paired RGB
(docs/engines.md); its size and frame rate are the scene's.

An output ending in `/` (or naming an existing directory) gets official `window-NN.npy` files instead.
`--rgb` also records the engine's beauty pass (its own lit image) beside the G-buffer: paired data for
`alaya-studio train` (the `rgb/` stream of a .gbuf.zip, `window-NN.rgb.npy` beside each window); the built-in
engine adds its sun mask (`sun/`). Every engine frame records its camera (`frame.meta["camera"]`).
`--engine panda3d` (the `engines` extra) records Panda3D's scene driving seed N's route (gbuffer/panda3d/route.py):
paired drives of a game we did not write, one per seed.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from dataclasses import replace
from itertools import islice
from pathlib import Path

from gbuffer.frame import GBufferFrame
from gbuffer.size import Size
from studio.commands._args import ArgumentError

ENGINES = ("demo", "panda3d")
BLENDER_ENGINES = ("cycles", "eevee")
ENGINE_DEFAULTS = {"size": "832x448", "fps": 30.0, "seed": 0}


def register(sub) -> None:
    p = sub.add_parser("record", help="record G-buffer frames from the built-in engine",
                       description=__doc__.split("\n\n")[0])
    p.add_argument("--engine", help=f"engine to record: {', '.join(ENGINES)} (demo: autopilot laps, the default; "
                                    f"panda3d: a seeded route), or with --blender its renderer: "
                                    f"{', '.join(BLENDER_ENGINES)} (default cycles)")
    p.add_argument("--frames", help="number of frames to record; with --blender a range A:B (both included; "
                                    "default: the scene's)")
    p.add_argument("--blender", metavar="SCENE.blend", help="render this Blender scene's animation (bpy)")
    p.add_argument("--camera", help="--blender: the camera to render through (default: the scene's)")
    p.add_argument("--samples", type=int, help="--blender: render samples per pixel (default: the scene's)")
    p.add_argument("-o", "--output", required=True,
                   help="FILE.gbuf.zip, or a directory (ending in /) for official .npy windows")
    # no argparse defaults: a Blender scene has its own size and rate, and says so when these are given
    p.add_argument("--size", help="WIDTHxHEIGHT (default 832x448)")
    p.add_argument("--fps", type=float, help="frames per second of the recording (default 30)")
    p.add_argument("--seed", type=int, help="world seed (default 0)")
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


def _frame_count(text: str | None) -> int:
    if text is None:
        raise ArgumentError("is required: the number of frames to record", "--frames")
    try:
        count = int(text)
    except ValueError:
        count = 0
    if count <= 0:
        raise ArgumentError(f"must be a positive number of frames, got {text}", "--frames")
    return count


def _progress(frames, total: int | None):
    from tqdm import tqdm

    return tqdm(frames, total=total, unit="frame", file=sys.stderr, desc="recording", dynamic_ncols=True)


def run(args) -> int:
    if args.blender is not None:
        return run_blender(args)
    from gbuffer.engine import EngineSource
    from gbuffer.formats import GbufZipWriter, write_npy_windows

    args.engine = args.engine or ENGINES[0]
    if args.engine not in ENGINES:
        raise ArgumentError(f"unknown engine {args.engine!r}; available: {', '.join(ENGINES)}", "--engine")
    for option in ("camera", "samples"):
        if getattr(args, option) is not None:
            raise ArgumentError("is for --blender recordings", f"--{option}")
    args.frames = _frame_count(args.frames)
    for option, default in ENGINE_DEFAULTS.items():
        if getattr(args, option) is None:
            setattr(args, option, default)
    if not 0 < args.fps <= 60:
        raise ArgumentError(f"must be above 0 and at most 60, got {args.fps:g}", "--fps")
    width, height = Size.parse(args.size, "--size")
    if args.engine == "panda3d":
        engine = _panda3d(width, height, args)
    else:
        engine = EngineSource.demo(width, height, fps=args.fps, seed=args.seed, rgb=args.rgb)  # checks the seed
    kind, path = _output_kind(args.output)

    source_name = f"engine:{args.engine} seed={args.seed}"
    with engine:
        frames: Iterator[GBufferFrame] = islice(engine, args.frames)
        if args.engine == "panda3d" and not args.rgb:         # its pass always draws the lit frame
            frames = (replace(f, rgb=None, sun=None) for f in frames)
        frames = _progress(frames, args.frames)
        if kind == "npy":
            written = write_npy_windows(frames, path)
            print(f"wrote {args.frames} frames to {len(written)} window file(s) in {path}", file=sys.stderr)
        else:
            metadata = {"engine": args.engine, "seed": args.seed, "autopilot": args.engine == "demo",
                        "route": args.engine == "panda3d", "rgb": args.rgb}
            with GbufZipWriter(path, fps=args.fps, source=source_name, metadata=metadata) as writer:
                for frame in frames:
                    writer.write(frame)
            print(f"wrote {args.frames} frames to {path}", file=sys.stderr)
    return 0


def _panda3d(width: int, height: int, args):
    """Panda3D's scene on seed `args.seed`'s route (a machine without the extra gets one line saying so)."""
    from gbuffer.panda3d import Panda3DSource

    return Panda3DSource(width, height, fps=args.fps, seed=args.seed)


def run_blender(args) -> int:
    """A .blend's animation → a paired .gbuf.zip; every check (scene, range, materials, output) before frame one."""
    from gbuffer.blender import BlenderScene
    from gbuffer.blender.scene import parse_frame_range
    from gbuffer.formats import GbufZipWriter

    engine = args.engine or BLENDER_ENGINES[0]
    if engine not in BLENDER_ENGINES:
        raise ArgumentError(f"unknown Blender engine {engine!r}; available: {', '.join(BLENDER_ENGINES)}",
                            "--engine")
    if args.rgb:
        raise ArgumentError("is implied by --blender (the combined pass is always recorded)", "--rgb")
    for option in ("size", "fps", "seed"):
        if getattr(args, option) is not None:
            raise ArgumentError("is the scene's own with --blender (set it in Blender)", f"--{option}")
    kind, path = _output_kind(args.output)
    if kind != "gbuf":
        raise ArgumentError(f"a Blender recording is one .gbuf.zip, not a directory of windows: {args.output!r}",
                            "-o")
    frames = parse_frame_range(args.frames) if args.frames is not None else None
    with BlenderScene(args.blender, camera=args.camera, engine=engine, samples=args.samples) as scene:
        numbers = scene.frame_range(frames)
        metadata = {"engine": f"blender:{engine}", "scene": Path(args.blender).name, "camera": scene.camera.name,
                    "frames": [numbers.start, numbers.stop - 1], "rgb": True}
        with GbufZipWriter(path, fps=scene.fps, source=f"blender:{Path(args.blender).name}",
                           metadata=metadata) as writer:
            for frame in _progress(scene.render(numbers), len(numbers)):
                writer.write(frame)
    print(f"wrote {len(numbers)} frames ({scene.width}x{scene.height}, {engine}) to {path}", file=sys.stderr)
    return 0
