"""`alaya-studio render INPUT... (--prompt TEXT | --schedule FILE) -o out.mp4`: offline render to H.264 MP4.
`alaya-studio render TAKE -o out.mp4` re-renders a recorded take with its schedule as played."""

from __future__ import annotations

import sys

from alaya_errors import UserError

DEFAULT_LIVE_FRAMES = 300


def register(sub) -> None:
    p = sub.add_parser("render", help="render a G-buffer sequence (or the built-in engine) to an MP4",
                       description="Render recorded G-buffers (.npy windows, .gbuf.zip, clip or image folders) or "
                                   "'demo' (the built-in engine on autopilot) to an H.264 MP4.")
    p.add_argument("inputs", nargs="+", metavar="INPUT", help="sequence files/folders, 'demo', or a take folder")
    what = p.add_mutually_exclusive_group()
    what.add_argument("--prompt", help="a preset name (e.g. cyberpunk) or free text")
    what.add_argument("--schedule", help="schedule JSON / keyframes / Parseq file, or 'eight-worlds'")
    p.add_argument("-o", "--output", required=True, help="output .mp4")
    p.add_argument("--renderer", help="reference (CPU, the default) or flash (needs --weights); a take: its own")
    p.add_argument("--weights", help="flash weights directory (official layout)")
    p.add_argument("--device", help="torch device, e.g. cpu or cuda (default: cuda when available)")
    p.add_argument("--renderer-option", action="append", metavar="KEY=VALUE",
                   help="renderer setting, repeatable (flash: num_steps=2, sampler_update=renoise, sigma_max=0.999, "
                        "timestep_shift=5, trim_startup_frames=true, gbuffer_input_range=-1..1, ...; reference: "
                        "backend=auto|gl|torch)")
    p.add_argument("--frames", type=int, help=f"frames to render (default: the whole sequence; "
                                              f"for 'demo' the schedule length or {DEFAULT_LIVE_FRAMES})")
    p.add_argument("--size", help="render size WxH (default: the input's; 416x224 for 'demo'; a take's own)")
    p.add_argument("--fps", type=float, help="output frame rate (default: the source's)")
    p.add_argument("--seed", type=int, help="default 0; a take: its own")
    p.add_argument("--metrics", help="write metrics JSON here")
    p.add_argument("--side-by-side", action="store_true", help="write the G-buffer channels beside the output")
    p.add_argument("--no-progress", action="store_true")
    p.set_defaults(func=run)


def run(args) -> int:
    from renderer import create_renderer
    from gbuffer.size import Size
    from studio.commands._args import check_renderer_options, parse_renderer_options
    from studio.offline import render_to_mp4, write_metrics
    from timeline.rollout import Rollout
    from timeline.schedule import Schedule, load_schedule
    from studio.sources import ENGINE_INPUTS, open_source
    from studio.takes import is_take, open_take
    from media.video import check_output_file

    if args.frames is not None and args.frames <= 0:
        raise UserError(f"must be a positive number of frames, got {args.frames}", "--frames")
    if args.fps is not None and not 0 < args.fps <= 240:
        raise UserError(f"must be between 0 and 240, got {args.fps}", "--fps")
    size = Size.parse(args.size, "--size") if args.size else None
    check_output_file(args.output)
    schedule = None
    if len(args.inputs) == 1 and is_take(args.inputs[0]):
        # a take replays its input with its schedule as played, at its size, seed and renderer unless overridden
        take = open_take(args.inputs[0])
        args.inputs = [str(take.input)]
        size = size or Size(take.meta["width"], take.meta["height"])
        args.fps = args.fps or take.meta["fps"]
        args.renderer = args.renderer or take.meta["renderer"]
        args.seed = take.meta["seed"] if args.seed is None else args.seed
        schedule = take.schedule
    if args.schedule:
        schedule = load_schedule(args.schedule)
    elif args.prompt:
        schedule = Schedule.single(args.prompt)
    elif schedule is None:
        raise UserError("give --prompt or --schedule (a take brings its own schedule)", "render")
    args.renderer = args.renderer or "reference"
    args.seed = 0 if args.seed is None else args.seed
    options = parse_renderer_options(args.renderer_option)
    check_renderer_options(args.renderer, options)
    if args.device:
        options["device"] = args.device
    if args.weights:
        if args.renderer != "flash":
            raise UserError("only the flash renderer takes weights", "--weights")
        options["weights"] = args.weights
    renderer = create_renderer(args.renderer, **options)

    live = len(args.inputs) == 1 and args.inputs[0] in ENGINE_INPUTS
    width, height = size or (416, 224)
    source = open_source(args.inputs, width=width, height=height, fps=args.fps, seed=args.seed)
    frames = args.frames
    if frames is None and live:
        frames = schedule.length or DEFAULT_LIVE_FRAMES
    if size is None:
        width, height = source.width, source.height
    fps = args.fps or source.fps
    session = renderer.open_session(width, height, seed=args.seed)
    rollout = Rollout(source, schedule, session)
    total = frames if frames is not None else (len(source) if hasattr(source, "__len__") else None)
    progress = None
    if not args.no_progress:
        from tqdm import tqdm

        progress = tqdm(total=total, unit="frame", file=sys.stderr, desc="render")
    try:
        metrics = render_to_mp4(rollout, args.output, frames=frames, fps=fps, renderer_name=args.renderer,
                                sbs=args.side_by_side, on_frame=(lambda _i: progress.update(1)) if progress else None)
    finally:
        if progress:
            progress.close()
        rollout.close()
    if args.metrics:
        write_metrics(metrics, args.metrics, {"inputs": args.inputs, "schedule": args.schedule,
                                              "prompt": args.prompt, "output": args.output})
    print(f"wrote {args.output}: {metrics.frames} frames {metrics.width}x{metrics.height} "
          f"at {metrics.fps:.1f} FPS rendered")
    return 0
