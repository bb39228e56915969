"""Parseq exports (sd-parseq by rewbs) → Schedule, reproducing Parseq's own prompt weights frame by frame.

What Parseq stores (its `prompts` section, three generations):
- v2: `{"format": "v2", "enabled": true, "commonPrompt": {positive, negative}, "commonPromptPos": "append"|
  "prepend", "promptList": [prompt, ...]}`
- v1: a bare list of prompts (the first one's `enabled: false` switches Parseq's prompts off)
- v0: `{"positive": "...", "negative": "..."}`: one prompt for every frame
with prompt = `{name, positive, negative, allFrames, from, to, overlap: {type: none|linear|custom, inFrames,
outFrames, custom}}`. A prompt is active on frames from..to inclusive (or all frames). Its weight is 1, except
with a linear overlap: (f - from) / inFrames while f < from + inFrames, and 1 - (f - (to - outFrames)) /
outFrames while f > to - outFrames. Overlapping prompts are composed with those weights (composable
diffusion); we normalise them to sum to 1, which is how our Conditioning blends. A lone active prompt counts
fully whatever its weight (Parseq then writes no weight at all). The export's last keyframe is the last frame;
`options.output_fps` is the fps.

Conversion: evaluate that rule for every frame, then compress: a run of frames whose weights change by the same
step every frame is one linear transition (this covers Parseq's aligned cross-fades and its "evenly space
prompts" layout exactly); a constant run is one segment. Fades that do not line up change the weights
non-linearly; those frames become one-frame segments, still exact, and a warning says so.
Errors: `custom` overlaps (Parseq formulas), `${...}` expressions in prompts, prompts switched off, a frame no
prompt covers. Negative prompts are dropped with a warning (the flash model has none).
"""

from __future__ import annotations

import math
from typing import Any

from prompt_presets import resolve_prompt
from prompt_presets.spec import MAX_TEXT
from timeline.schedule.errors import ScheduleError, warn, within
from timeline.schedule.keyframes import parse_weighted_prompt
from timeline.schedule.model import MAX_FRAMES, PromptSpec, Schedule

# Parseq exports are evaluated frame by frame, so their cost is frames × prompts, not their size in bytes
# (issue 42: 434 bytes asked for 8 prompts over 1,080,000 frames and held the server for 20-45 s)
MAX_PARSEQ_FRAMES = 108_000            # one hour at 30 fps
MAX_PARSEQ_WORK = 500_000              # prompt-frames evaluated (each prompt over each frame)
TOLERANCE = 1e-6        # weights equal within this are the same (Parseq rounds its weights to 4 digits)
Blend = dict[tuple[str, str | None], float]     # (prompt text, preset or None) → normalised weight


def is_parseq(data: Any) -> bool:
    return isinstance(data, dict) and "prompts" in data and ("keyframes" in data or "options" in data)


def schedule_from_parseq(data: dict, *, fps: float | None = None, where: str | None = None) -> Schedule:
    prompts, field, common, common_pos = _prompt_list(data, where)
    last_frame = _last_frame(data, prompts, where)
    given = data.get("options")
    options = given if isinstance(given, dict) else {}
    fps = fps or options.get("output_fps") or 30.0

    _require_affordable(last_frame + 1, len(prompts), where)
    entries = [_Entry(p, f"{field}[{i}]", last_frame, common, common_pos, where) for i, p in enumerate(prompts)]
    if any(e.negative for e in entries) or str(common.get("negative") or "").strip():
        warn("the Parseq negative prompts were dropped: the flash model has no negative prompt, so only the "
             "positive prompts play", where)
    blends = [_blend_at(f, entries, where) for f in range(last_frame + 1)]
    segments, stepped = _compress(blends)
    if stepped:
        warn(f"frames {_ranges(stepped)}: overlapping fades that do not line up are not a linear "
             "cross-fade; imported exactly as one-frame steps", where)
    return Schedule.build({"fps": fps, "length": last_frame + 1, "segments": segments}, where)


def _require_affordable(frames: int, prompts: int, where: str | None) -> None:
    """Refuse an export whose frame-by-frame evaluation would cost more than the bounds, before any of it."""
    if frames > MAX_PARSEQ_FRAMES:
        raise ScheduleError(f"keyframes: a Parseq export of {frames} frames is longer than this studio imports "
                            f"({MAX_PARSEQ_FRAMES} frames)", where)
    if frames * prompts > MAX_PARSEQ_WORK:
        raise ScheduleError(f"prompts: {prompts} Parseq prompts over {frames} frames is more than this studio "
                            f"evaluates ({MAX_PARSEQ_WORK} prompt-frames); use fewer prompts or frames", where)


def _prompt_list(data: dict, where: str | None) -> tuple[list, str, dict, str]:
    """(prompts, their field name, the common prompt, where the common prompt goes)."""
    section = data["prompts"]
    if isinstance(section, dict) and "promptList" in section:            # v2
        if section.get("enabled") is False:
            raise ScheduleError("prompts.enabled is false: this Parseq document leaves prompts to Deforum, "
                                "so it has none to import", where)
        common = section.get("commonPrompt") or {}
        if not isinstance(common, dict):
            raise ScheduleError("prompts.commonPrompt: expected an object with 'positive'", where)
        return _list(section["promptList"], "prompts.promptList", where), "prompts.promptList", common, \
            section.get("commonPromptPos", "append")
    if isinstance(section, list):                                         # v1
        if section and isinstance(section[0], dict) and section[0].get("enabled") is False:
            raise ScheduleError("prompts[0].enabled is false: this Parseq document leaves prompts to Deforum, "
                                "so it has none to import", where)
        return _list(section, "prompts", where), "prompts", {}, "append"
    if isinstance(section, dict) and "positive" in section:              # v0
        return [{"positive": section["positive"], "negative": section.get("negative", ""), "allFrames": True}], \
            "prompts", {}, "append"
    raise ScheduleError("prompts: expected Parseq's promptList, a list of prompts or {positive, negative}", where)


def _list(value: Any, field: str, where: str | None) -> list:
    if not isinstance(value, list) or not value:
        raise ScheduleError(f"{field}: expected a non-empty list of prompts", where)
    return value


def _last_frame(data: dict, prompts: list, where: str | None) -> int:
    keyframes = data.get("keyframes") or []
    if not isinstance(keyframes, list):
        raise ScheduleError("keyframes: expected a list of {\"frame\": ...} objects", where)
    frames: list[float] = [f for k in keyframes if isinstance(k, dict) and isinstance(f := k.get("frame"), (int, float))
                           and not isinstance(f, bool) and math.isfinite(f)]
    if frames:
        last = int(max(frames))
    else:
        ends: list[int] = [e for p in prompts if isinstance(p, dict) and not p.get("allFrames")
                           and isinstance(e := p.get("to"), int) and not isinstance(e, bool)]
        if not ends:
            raise ScheduleError("keyframes: no keyframe frames, so the export's length is unknown", where)
        last = max(ends)
    if not 0 <= last < MAX_FRAMES:
        raise ScheduleError(f"keyframes: last frame {last} is outside 0..{MAX_FRAMES - 1}", where)
    return last


class _Entry:
    """One Parseq prompt, checked, with its (text, preset) blend and its frame range."""

    def __init__(self, raw: Any, field: str, last_frame: int, common: dict, common_pos: str, where: str | None):
        if not isinstance(raw, dict):
            raise ScheduleError(f"{field}: expected an object, got {type(raw).__name__}", where)
        positive = raw.get("positive")
        if not isinstance(positive, str):
            raise ScheduleError(f"{field}.positive: missing or not text", where)
        extra = str(common.get("positive") or "").strip()
        if extra:
            positive = f"{extra} {positive}" if common_pos == "prepend" else f"{positive} {extra}"
        if "${" in positive:
            raise ScheduleError(f"{field}.positive: Parseq expressions (${{...}}) are not supported", where)
        if len(positive) > MAX_TEXT:
            raise ScheduleError(f"{field}.positive: {len(positive)} characters; at most {MAX_TEXT} characters",
                                where)
        self.negative = str(raw.get("negative") or "").strip()
        self.parts = [resolve_prompt(t, w) for t, w in parse_weighted_prompt(positive, within(where, field))]
        if raw.get("allFrames"):
            self.start, self.end = 0, last_frame
        else:
            self.start, self.end = _int(raw, "from", field, where), _int(raw, "to", field, where)
            if self.end < self.start:
                raise ScheduleError(f"{field}: 'to' ({self.end}) is before 'from' ({self.start})", where)
        overlap = raw.get("overlap") or {}
        if not isinstance(overlap, dict):
            raise ScheduleError(f"{field}.overlap: expected an object {{type, inFrames, outFrames}}", where)
        self.kind = overlap.get("type", "none")
        if self.kind == "custom":
            raise ScheduleError(f"{field}.overlap.type: 'custom' weights are Parseq formulas, which are not "
                                "supported; use 'linear' or 'none'", where)
        if self.kind not in ("none", "linear"):
            raise ScheduleError(f"{field}.overlap.type: unknown overlap type {self.kind!r}", where)
        self.fade_in = _int(overlap, "inFrames", f"{field}.overlap", where, 0)
        self.fade_out = _int(overlap, "outFrames", f"{field}.overlap", where, 0)

    def active(self, f: int) -> bool:
        return self.start <= f <= self.end

    def weight(self, f: int) -> float:
        """Parseq's calculateWeight for this prompt at frame f (f active)."""
        if self.kind == "linear":
            if self.fade_in and f < self.start + self.fade_in:
                return (f - self.start) / self.fade_in
            if self.fade_out and f > self.end - self.fade_out:
                return 1.0 - (f - (self.end - self.fade_out)) / self.fade_out
        return 1.0


def _int(obj: dict, key: str, field: str, where: str | None, default: int | None = None) -> int:
    value = obj.get(key, default)
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ScheduleError(f"{field}.{key}: expected a whole number ≥ 0, got {value!r}", where)
    return value


def _blend_at(f: int, entries: list[_Entry], where: str | None) -> Blend:
    active = [e for e in entries if e.active(f)]
    if not active:
        raise ScheduleError(f"frame {f}: no Parseq prompt covers it", where)
    weights = [1.0] if len(active) == 1 else [e.weight(f) for e in active]
    total = sum(weights)
    if total <= 0:
        raise ScheduleError(f"frame {f}: every active Parseq prompt has weight 0", where)
    blend: Blend = {}
    for entry, w in zip(active, weights):
        inner = sum(p.weight for p in entry.parts)          # the prompt's own composable weights
        for p in entry.parts:
            key = (p.text, p.preset)
            blend[key] = blend.get(key, 0.0) + (w / total) * (p.weight / inner)
    return {k: v for k, v in blend.items() if v > TOLERANCE}


def _compress(blends: list[Blend]) -> tuple[list[dict], list[int]]:
    """Per-frame blends → segments (see the module doc); also the frames that became one-frame steps."""
    segments = [_segment(0, blends[0])]
    stepped: list[int] = []
    f = 1
    while f < len(blends):
        if _same(blends[f], blends[f - 1]):
            f += 1
            continue
        step = _diff(blends[f], blends[f - 1])
        end = f
        while end + 1 < len(blends) and _same(_diff(blends[end + 1], blends[end]), step):
            end += 1
        frames = end - f + 1
        if frames == 1 and end + 1 < len(blends) and not _same(blends[end + 1], blends[end]):
            stepped.append(f)                  # a change that neither holds nor continues linearly
        segments.append(_segment(f, blends[end], frames))
        f = end + 1
    return segments, stepped


def _segment(start: int, blend: Blend, frames: int = 0) -> dict:
    prompts = [PromptSpec(preset=preset, weight=round(w, 9)) if preset else PromptSpec(text=text, weight=round(w, 9))
               for (text, preset), w in blend.items()]
    transition = {"kind": "linear", "frames": frames} if frames > 1 else "cut"
    return {"start": start, "prompts": prompts, "transition": transition}


def _diff(a: Blend, b: Blend) -> Blend:
    return {k: a.get(k, 0.0) - b.get(k, 0.0) for k in a.keys() | b.keys()}


def _same(a: Blend, b: Blend) -> bool:
    return all(abs(a.get(k, 0.0) - b.get(k, 0.0)) <= TOLERANCE for k in a.keys() | b.keys())


def _ranges(frames: list[int]) -> str:
    """[3, 4, 5, 9] → '3..5, 9'."""
    groups: list[list[int]] = []
    for f in frames:
        if groups and f == groups[-1][1] + 1:
            groups[-1][1] = f
        else:
            groups.append([f, f])
    return ", ".join(str(a) if a == b else f"{a}..{b}" for a, b in groups)
