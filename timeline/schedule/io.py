"""Reading schedules: files in any supported format, text, and the built-in schedules by name.

Formats: "schedule" (our versioned JSON), "keyframes" (Deforum / FizzNodes keyframe prompts, also Deforum
settings files), "parseq" (Parseq exports); "auto" tells them apart by content:
JSON with `version`/`segments` → schedule; with `prompts` and `keyframes`/`options` → Parseq; with `prompts`
(or `animation_prompts`) → Deforum settings; an object whose keys are all frame numbers → keyframes;
anything that is not JSON → keyframe text.
"""

from __future__ import annotations

import difflib
import re
from pathlib import Path

from prompt_presets.presets import load_presets
from timeline.schedule.errors import ScheduleError, warn
from timeline.schedule.jsondoc import load_json
from timeline.schedule.keyframes import (keyframes_from_dict, parse_keyframe_text, schedule_from_deforum_settings,
                                       schedule_from_keyframes)
from timeline.schedule.model import Schedule
from timeline.schedule.parseq import is_parseq, schedule_from_parseq

BUILTIN_DIR = Path(__file__).resolve().parent.parent / "schedules"
FORMATS = ("auto", "schedule", "keyframes", "parseq")
MAX_FILE_BYTES = 20 * 1024 * 1024


def builtin_names() -> list[str]:
    return sorted(p.stem for p in BUILTIN_DIR.glob("*.json"))


def _builtin_path(name: str) -> Path | None:
    if len(name) > 100:         # no built-in name is this long; a longer one would fail in the OS, not say "no"
        return None
    stem = re.sub(r"[\s\-]+", "_", name.strip()).lower()        # 'eight-worlds' → 'eight_worlds'
    path = BUILTIN_DIR / f"{stem}.json"
    return path if re.fullmatch(r"[a-z0-9_]+", stem) and path.is_file() else None


def load_builtin(name: str) -> Schedule:
    """A built-in schedule by name ('eight_worlds' or 'eight-worlds')."""
    path = _builtin_path(name)
    if path is None:
        raise ScheduleError(f"unknown built-in schedule {name!r}; built-ins: {', '.join(builtin_names())}")
    return Schedule.from_json(path.read_text(encoding="utf-8"), where=f"built-in {path.stem}")


def load_schedule(path: str | Path, *, format: str = "auto", fps: float | None = None, blend: bool = False,
                  length: int | None = None) -> Schedule:
    """A schedule file in any supported format, or a built-in schedule's name."""
    p = Path(path)
    if not p.is_file():
        if isinstance(path, str) and _builtin_path(path):
            return load_builtin(path)
        what = "is a folder, not a schedule file" if p.is_dir() else \
            f"no such file or built-in schedule (built-ins: {', '.join(builtin_names())})"
        raise ScheduleError(what, str(path))
    if p.stat().st_size > MAX_FILE_BYTES:
        raise ScheduleError(f"file is larger than {MAX_FILE_BYTES // 2**20} MiB; not a schedule", str(path))
    try:
        text = p.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise ScheduleError("not a text file (UTF-8 expected)", str(path)) from None
    return parse_schedule_text(text, format, fps=fps, blend=blend, length=length, where=str(path))


def parse_schedule_text(text: str, hint: str | None = None, *, fps: float | None = None, blend: bool = False,
                        length: int | None = None, where: str | None = None) -> Schedule:
    """Text in any supported format → Schedule. `hint`: one of FORMATS (None = auto). `fps` overrides the
    document's; `blend` and `length` apply to keyframe imports (see keyframes.py). What the import could not
    carry over exactly is warned (`ScheduleImportWarning`, or `collected_warnings`), names that are no style's
    among it."""
    schedule = _parse_text(text, hint, fps=fps, blend=blend, length=length, where=where)
    _note_unknown_names(schedule, where)
    return schedule


def _parse_text(text: str, hint: str | None, *, fps: float | None, blend: bool, length: int | None,
                where: str | None) -> Schedule:
    hint = hint or "auto"
    if hint not in FORMATS:
        raise ScheduleError(f"unknown format {hint!r}; expected one of {', '.join(FORMATS)}", where)
    body = text.strip()
    if not body:
        raise ScheduleError("empty schedule", where)
    try:
        data = load_json(body, where)
    except ScheduleError as json_error:
        if hint in ("schedule", "parseq") or body.startswith("["):
            raise
        # not JSON: keyframe text (FizzNodes-style pairs without braces, a trailing comma...)
        try:
            keyframes = parse_keyframe_text(body, where)
        except ScheduleError:
            if body.startswith("{") and hint == "auto":    # more likely broken JSON than broken keyframes
                raise json_error from None
            raise
        return schedule_from_keyframes(keyframes, fps=fps or 30.0, blend=blend, length=length, where=where)
    return schedule_from_data(data, hint, fps=fps, blend=blend, length=length, where=where)


NAME_LIKE = re.compile(r"[A-Za-z][A-Za-z0-9_\-]{2,39}")     # one word, no spaces: meant as a style's name
MAX_NAME_NOTES = 5


def _note_unknown_names(schedule: Schedule, where: str | None) -> None:
    """A block whose whole prompt is one word that names no style (`0: "nosuchstyle"`) was most likely meant as
    one: it still
    plays, as free text, but the import says so (once per word, for the first few), with the nearest name."""
    frames: dict[str, list[int]] = {}
    for seg in schedule.segments:                   # a word inside a blend ("polar AND fog") is a word
        text = seg.prompts[0].text if len(seg.prompts) == 1 else None
        if text is not None and NAME_LIKE.fullmatch(text):
            frames.setdefault(text, []).append(seg.start)
    names = {name: name for name in load_presets()} | {p.title.lower(): p.name for p in load_presets().values()}
    for word, starts in list(frames.items())[:MAX_NAME_NOTES]:
        near = difflib.get_close_matches(word.lower().replace("-", "_"), names, n=1, cutoff=0.75)
        hint = f"; did you mean {names[near[0]]!r}?" if near else "; the gallery's tiles name the styles"
        at = ", ".join(map(str, starts[:3])) + (" …" if len(starts) > 3 else "")
        warn(f"{word!r} (the block at frame{'s' if len(starts) > 1 else ''} {at}) is no style's name, so it "
             f"plays as free text, matched to the styles by meaning{hint}", where)
    if len(frames) > MAX_NAME_NOTES:
        warn(f"{len(frames) - MAX_NAME_NOTES} more one-word prompts are no style's name either", where)


def schedule_from_data(data: dict, hint: str | None = None, *, fps: float | None = None, blend: bool = False,
                       length: int | None = None, where: str | None = None) -> Schedule:
    """Parsed JSON in any supported format → Schedule (same options as parse_schedule_text)."""
    if hint not in (None, *FORMATS):
        raise ScheduleError(f"unknown format {hint!r}; expected one of {', '.join(FORMATS)}", where)
    if not isinstance(data, dict):
        raise ScheduleError(f"expected a JSON object, got {type(data).__name__}", where)
    kind = hint if hint and hint != "auto" else _detect(data, where)
    if kind == "schedule":
        return Schedule.from_json({**data, "fps": fps} if fps else data, where)
    if kind == "parseq":
        if not is_parseq(data):
            raise ScheduleError("not a Parseq export: expected 'prompts' and 'keyframes' or 'options'", where)
        return schedule_from_parseq(data, fps=fps, where=where)
    if "prompts" in data or "animation_prompts" in data:
        settings = data if length is None else {**data, "max_frames": length}
        return schedule_from_deforum_settings(settings, fps=fps, blend=blend, where=where)
    return schedule_from_keyframes(keyframes_from_dict(data, where), fps=fps or 30.0, blend=blend, length=length,
                                   where=where)


def schedule_from_value(value: dict | str, where: str | None = None) -> Schedule:
    """What an API request or data-channel message carries: a schedule (or keyframe / Parseq) JSON object, a
    built-in schedule's name, or schedule text in any format. Never reads a file."""
    if isinstance(value, str) and _builtin_path(value):
        return load_builtin(value)
    if isinstance(value, str):
        return parse_schedule_text(value, where=where)
    return schedule_from_data(value, where=where)


def _detect(data: dict, where: str | None) -> str:
    if "segments" in data or "version" in data:
        return "schedule"
    if is_parseq(data):
        return "parseq"
    if "prompts" in data or "animation_prompts" in data:
        return "keyframes"                                  # Deforum settings
    if data and all(re.fullmatch(r"\s*[+-]?\d+(\.0*)?\s*", str(k)) for k in data):
        return "keyframes"
    raise ScheduleError("cannot tell the format: expected a schedule (version, segments), keyframes "
                        '{"0": "prompt"}, a Parseq export (prompts, keyframes) or Deforum settings (prompts)', where)
