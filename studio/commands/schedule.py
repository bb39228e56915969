"""`alaya-studio schedule import|validate|show`: convert keyframe / Parseq schedules, check and inspect them.

FILE is a schedule JSON, keyframe text or JSON (Deforum, FizzNodes), a Parseq export, or a built-in schedule's
name (`eight-worlds`). Import warnings (what could not be carried over exactly) go to stderr as `warning: ...`.
"""

from __future__ import annotations

import json
import re
import sys
import warnings
from pathlib import Path

from alaya_errors import UserError

MAX_ROWS = 10_000


def register(sub) -> None:
    p = sub.add_parser("schedule", help="import, validate or show a prompt schedule",
                       description="Prompt schedules: frame-accurate prompt timelines (see docs/schedule.md).")
    actions = p.add_subparsers(dest="action", metavar="ACTION")

    imp = actions.add_parser("import", help="convert keyframes / a Parseq export to schedule JSON")
    _file_options(imp)
    imp.add_argument("-o", "--output", help="write the schedule JSON here (default: print it)")
    imp.add_argument("--fps", type=float, help="frames per second of the result (default: the file's, else 30)")
    imp.add_argument("--blend", action="store_true",
                     help="keyframes: blend linearly across each gap between keyframes, as FizzNodes does "
                          "(default: cut at each keyframe, as Deforum does)")
    imp.add_argument("--length", type=int, help="keyframes: length of the schedule in frames (default: open-ended)")
    imp.set_defaults(func=run_import)

    val = actions.add_parser("validate", help="check a schedule; prints 'ok: N segments, L frames'")
    _file_options(val)
    val.set_defaults(func=run_validate)

    show = actions.add_parser("show", help="print frame → prompts and weights")
    _file_options(show)
    show.add_argument("--frames", help="frames to show: a:b:step (b excluded), single frames, comma-separated "
                                       "(default: each segment's first and fully-blended frame, and the last)")
    show.set_defaults(func=run_show)
    p.set_defaults(func=lambda args: _usage(p))


def _file_options(p) -> None:
    from timeline.schedule import FORMATS
    p.add_argument("file", metavar="FILE", help="schedule / keyframes / Parseq file, or a built-in name")
    p.add_argument("--format", choices=FORMATS, default="auto", help="input format (default: auto)")


def _usage(parser) -> int:
    parser.print_help(sys.stderr)
    return 2


def _load(args, **options):
    """load_schedule, printing import warnings to stderr."""
    from timeline.schedule import ScheduleImportWarning, load_schedule
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ScheduleImportWarning)
        schedule = load_schedule(args.file, format=args.format, **options)
    for w in caught:
        if issubclass(w.category, ScheduleImportWarning):
            print(f"warning: {w.message}", file=sys.stderr)
        else:
            warnings.showwarning(w.message, w.category, w.filename, w.lineno)
    return schedule


def run_import(args) -> int:
    if args.length is not None and args.length < 1:
        raise UserError(f"must be a positive number of frames, got {args.length}", "--length")
    schedule = _load(args, fps=args.fps, blend=args.blend, length=args.length)
    text = json.dumps(schedule.to_json(), indent=2) + "\n"
    if not args.output:
        sys.stdout.write(text)
        return 0
    try:
        Path(args.output).write_text(text, encoding="utf-8")
    except OSError as exc:
        raise UserError(f"cannot write: {exc.strerror}", args.output) from None
    print(f"wrote {args.output}: {schedule.describe()}")
    return 0


def run_validate(args) -> int:
    print(f"ok: {_load(args).describe()}")
    return 0


def run_show(args) -> int:
    schedule = _load(args)
    frames = parse_frames(args.frames, schedule) if args.frames else default_frames(schedule)
    print(f"{'frame':>7}  {'segment':>7}  {'mode':<6}  prompts")
    for f in frames:
        cond = schedule.conditioning_at(f)
        prompts = " + ".join(f"{p.preset or _short(p.text)} {p.weight:.4f}" for p in cond.prompts)
        print(f"{f:>7}  {schedule.segment_index_at(f):>7}  {cond.mode:<6}  {prompts}")
    return 0


def _short(text: str, n: int = 40) -> str:
    return repr(text if len(text) <= n else text[:n - 1] + "…")


def default_frames(schedule) -> list[int]:
    """Each segment's first frame and the frame its transition completes, and the last frame."""
    frames = set()
    for seg in schedule.segments:
        frames.add(seg.start)
        if seg.transition.frames > 1:
            frames.add(seg.start + seg.transition.frames - 1)
    if schedule.length:
        frames.add(schedule.length - 1)
    return sorted(f for f in frames if schedule.length is None or f < schedule.length)


def parse_frames(spec: str, schedule) -> list[int]:
    """'0:100:10,637' → [0, 10, ..., 90, 637]. An open end (`a:`) runs to the schedule's length."""
    frames: list[int] = []
    for item in spec.split(","):
        m = re.fullmatch(r"\s*(\d*)\s*(?::\s*(\d*)\s*(?::\s*(\d+)\s*)?)?", item)
        if not item.strip() or not m:
            raise UserError(f"{item.strip()!r} is not a frame or a:b:step with whole numbers", "--frames")
        if ":" not in item:
            frames.append(int(m[1]))
            continue
        end = int(m[2]) if m[2] else schedule.length
        if end is None:
            raise UserError("an open end (a:) needs a schedule with a length", "--frames")
        step = int(m[3]) if m[3] else 1
        if step == 0:
            raise UserError("step must be at least 1", "--frames")
        frames.extend(range(int(m[1] or 0), end, step))
        if len(frames) > MAX_ROWS:
            break
    if len(frames) > MAX_ROWS:
        raise UserError(f"selects more than {MAX_ROWS} frames; use a step", "--frames")
    if not frames:
        raise UserError(f"{spec!r} selects no frames", "--frames")
    return frames
