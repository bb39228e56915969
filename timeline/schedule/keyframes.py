"""Keyframe prompt schedules as Deforum and FizzNodes write them → Schedule.

Accepted (see docs/schedule.md):
- a JSON object `{"0": "a castle", "120": "a volcano"}` (Deforum's animation prompts), or a Deforum settings
  file with `prompts` (plus `animation_prompts_positive` / `_negative`, `fps`, `max_frames`);
- the same pairs as text without braces, as FizzNodes' BatchPromptSchedule box takes them:
  `"0": "a castle", "120": "a volcano",` — commas and/or newlines between pairs, a trailing comma, and
  also unquoted `0: cyberpunk` lines;
- per keyframe, weighted blends: A1111 composable diffusion `cyberpunk:0.7 AND volcano:0.3` (no weight = 1)
  or a prompt made only of weighted groups `(cyberpunk:0.7) (volcano:0.3)`.
A keyframe's prompt holds until the next (Deforum: cut). With `blend`, each gap between keyframes J < K is one
linear blend, exactly FizzNodes' interpolation: frame J is J's prompt, frame K is K's, and frame J+i weighs
K's prompt i/(K-J). Frames before the first keyframe take its prompt (Deforum back-fills them).
Not supported, with an error: frame-dependent weights in backticks, frame expressions as keys (`max_f/2`),
negative weights. Negative prompts (`--neg`) are dropped with a warning: the flash model has no negative prompt
(a schedule's PromptSpec has no negative side to carry one).
"""

from __future__ import annotations

import json
import re
from typing import Any

from prompt_presets import resolve_prompt
from timeline.schedule.errors import ScheduleError, warn, within
from timeline.schedule.jsondoc import load_json
from timeline.schedule.model import MAX_FRAMES, PromptSpec, Schedule

_NUMBER = r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)"
_AND = re.compile(r"\s+AND\s+")
_WEIGHTED = re.compile(rf"^(?P<text>.*?)\s*:\s*(?P<weight>{_NUMBER})\s*$", re.S)
_GROUP = rf"\(\s*(?P<text>[^()]+?)\s*:\s*(?P<weight>{_NUMBER})\s*\)"
_ONLY_GROUPS = re.compile(rf"^\s*(?:{_GROUP}[\s,]*)+$")
_ANY_GROUP = re.compile(_GROUP)
_KEY = re.compile(r'\s*(?:"(?P<quoted>[^"\n]*)"|(?P<bare>[^":,\n{}]+?))\s*:\s*')
_NEXT_PAIR = re.compile(r',\s*"?[+-]?\d+(?:\.\d+)?"?\s*:|\n|$')


def parse_keyframe_text(text: str, where: str | None = None) -> dict[int, str]:
    """`"0": "a castle", "120": "a volcano"` (braces, quotes and the trailing comma optional) → {frame: prompt}."""
    body = text.strip()
    if body.startswith("{") and body.endswith("}"):
        body = body[1:-1]
    keyframes: dict[int, str] = {}
    pos = 0
    while True:
        while pos < len(body) and (body[pos].isspace() or body[pos] == ","):
            pos += 1
        if pos >= len(body):
            break
        line = body.count("\n", 0, pos) + 1
        key = _KEY.match(body, pos)
        if not key:
            snippet = body[pos:pos + 30].split("\n")[0]
            raise ScheduleError(f'line {line}: expected "FRAME": "prompt", got {snippet!r}', where)
        frame = frame_number(key["quoted"] if key["quoted"] is not None else key["bare"], where)
        pos = key.end()
        if body.startswith('"', pos):
            try:
                prompt, pos = json.JSONDecoder().raw_decode(body, pos)
            except json.JSONDecodeError:
                raise ScheduleError(f"line {line}: keyframe {frame}: unterminated quoted prompt", where) from None
            rest = re.match(r"[ \t]*(,|\n|$)", body[pos:])
            if not rest:
                raise ScheduleError(f"line {line}: keyframe {frame}: expected ',' or a new line after the prompt",
                                    where)
        else:
            end = _NEXT_PAIR.search(body, pos)
            assert end is not None              # the pattern also matches at the end of the text
            prompt, pos = body[pos:end.start()].strip().rstrip(","), end.start()
        if frame in keyframes:
            raise ScheduleError(f"line {line}: keyframe {frame} appears twice", where)
        keyframes[frame] = prompt
    if not keyframes:
        raise ScheduleError("no keyframes found (expected \"FRAME\": \"prompt\" pairs)", where)
    return keyframes


def keyframes_from_dict(data: dict, where: str | None = None) -> dict[int, str]:
    """{"0": "prompt", ...} as parsed JSON → {frame: prompt}."""
    keyframes: dict[int, str] = {}
    for key, prompt in data.items():
        frame = frame_number(key, where)
        if not isinstance(prompt, str):
            raise ScheduleError(f"keyframe {frame}: the prompt must be text, got {type(prompt).__name__}", where)
        if frame in keyframes:
            raise ScheduleError(f"keyframe {frame} appears twice", where)
        keyframes[frame] = prompt
    if not keyframes:
        raise ScheduleError("no keyframes", where)
    return keyframes


def frame_number(key: Any, where: str | None = None) -> int:
    text = str(key).strip()
    if not re.fullmatch(r"[+-]?\d+(?:\.0*)?", text):
        raise ScheduleError(f"keyframe key {text!r} is not a frame number (expressions are not supported)", where)
    frame = int(float(text))
    if not 0 <= frame <= MAX_FRAMES:
        raise ScheduleError(f"keyframe {frame} is outside 0..{MAX_FRAMES}", where)
    return frame


def parse_weighted_prompt(text: str, where: str) -> list[tuple[str, float]]:
    """One keyframe's prompt → [(text, weight), ...]; negative part (`--neg ...`) already removed."""
    if "`" in text:
        raise ScheduleError("frame-dependent weights (`...` expressions) are not supported", where)
    parts = _AND.split(text)
    if len(parts) > 1:
        pairs = [_weighted_part(p) for p in parts]
    elif _ONLY_GROUPS.match(text):
        pairs = [(m["text"], float(m["weight"])) for m in _ANY_GROUP.finditer(text)]
    else:
        if _ANY_GROUP.search(text):
            warn("attention weights like '(word:1.2)' inside a prompt are kept as plain text", where)
        pairs = [(text, 1.0)]
    out = []
    for prompt, weight in pairs:
        prompt = prompt.strip().strip(",").strip()
        if not prompt:
            raise ScheduleError("empty prompt", where)
        if weight < 0:
            raise ScheduleError(f"negative weight {weight:g} for {prompt[:40]!r} is not supported", where)
        if weight > 0:
            out.append((prompt, weight))
    if not out:
        raise ScheduleError("all weights are 0", where)
    return out


def _weighted_part(part: str) -> tuple[str, float]:
    part = part.strip()
    if part.startswith("(") and part.endswith(")") and part.count("(") == 1:
        part = part[1:-1]
    m = _WEIGHTED.match(part)
    return (m["text"], float(m["weight"])) if m else (part, 1.0)


def prompt_specs(text: str, where: str) -> list[PromptSpec]:
    """A prompt in keyframe syntax → PromptSpecs; preset names become presets, other text stays free text."""
    return [PromptSpec.from_weighted(resolve_prompt(t, w)) for t, w in parse_weighted_prompt(text, where)]


def split_negative(text: str) -> tuple[str, str]:
    positive, _, negative = text.partition("--neg")
    return positive.strip(), negative.strip()


def schedule_from_keyframes(keyframes: dict[int, str], *, fps: float = 30.0, blend: bool = False,
                            length: int | None = None, prefix: str = "",
                            where: str | None = None) -> Schedule:
    """{frame: prompt} → Schedule: cuts at each keyframe, or (blend) one linear blend across each gap.
    `prefix` is prepended to every prompt (Deforum's animation_prompts_positive)."""
    frames = sorted(keyframes)
    if frames[0] > 0:
        warn(f"the first keyframe is {frames[0]}: its prompt also plays on frames 0..{frames[0] - 1}, which no "
             "keyframe covers (as in Deforum)", where)
    if length is not None and frames[-1] >= length:
        raise ScheduleError(f"keyframe {frames[-1]} is at or past the schedule's length ({length} frames)", where)
    negatives = []
    segments = []
    for i, frame in enumerate(frames):
        positive, negative = split_negative(keyframes[frame])
        if negative:
            negatives.append(frame)
        text = f"{prefix} {positive}".strip() if prefix else positive
        specs = prompt_specs(text, within(where, f"keyframe {frame}"))
        if i == 0:
            segments.append({"start": 0, "prompts": specs})
        elif blend:
            previous = frames[i - 1]
            segments.append({"start": previous + 1, "prompts": specs,
                             "transition": {"kind": "linear", "frames": frame - previous}})
        else:
            segments.append({"start": frame, "prompts": specs})
    if negatives:
        at = f"keyframe{'s' if len(negatives) > 1 else ''} {', '.join(map(str, negatives))}"
        warn(f"the negative prompt (--neg) at {at} was dropped: the flash model has no negative prompt, "
             "so only the positive prompt plays", where)
    return Schedule.build({"fps": fps, "length": length, "segments": segments}, where)


def schedule_from_deforum_settings(settings: dict, *, fps: float | None = None, blend: bool = False,
                                   where: str | None = None) -> Schedule:
    """A Deforum settings file: `prompts` (or `animation_prompts`), `animation_prompts_positive` (prepended
    to every prompt), `animation_prompts_negative` (ignored, with a warning), `fps`, `max_frames` (length)."""
    prompts = settings.get("prompts", settings.get("animation_prompts"))
    if isinstance(prompts, str):                     # some exports keep the JSON text of the prompts box
        prompts = load_json(prompts, where)
    if not isinstance(prompts, dict):
        raise ScheduleError("Deforum settings: 'prompts' must be an object {\"FRAME\": \"prompt\"}", where)
    prefix = settings.get("animation_prompts_positive") or settings.get("positive_prompts") or ""
    negative = settings.get("animation_prompts_negative") or settings.get("negative_prompts") or ""
    if str(negative).strip():
        warn(f"Deforum's negative prompt {str(negative)[:40]!r} was dropped: "
             "the flash model has no negative prompt", where)
    length = settings.get("max_frames")
    if length is not None and (not isinstance(length, int) or isinstance(length, bool) or length < 1):
        raise ScheduleError(f"Deforum settings: max_frames must be a positive whole number, got {length!r}", where)
    return schedule_from_keyframes(keyframes_from_dict(prompts, where), fps=fps or settings.get("fps") or 30.0,
                                   blend=blend, length=length, prefix=str(prefix).strip(), where=where)
