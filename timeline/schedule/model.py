"""The schedule: a versioned JSON document (validated with pydantic) that maps every frame to a `Conditioning`.

Shape (see docs/schedule.md):
    {"version": 1, "fps": 30, "length": 637, "loop": false,
     "segments": [{"start": 0, "prompt": "cyberpunk"},
                  {"start": 80, "prompts": [{"preset": "volcano", "weight": 0.7}, {"text": "...", "weight": 0.3}],
                   "transition": {"kind": "linear", "frames": 16, "easing": "smoothstep"}}]}

Frame convention: a transition of L frames into a segment starting at s occupies frames s..s+L-1 of that
segment; at frame f the new prompts weigh easing(t) with t = (f - s + 1) / L, so frame s+L-1 is fully the new
segment. It blends *from* the conditioning of frame s-1, whatever that was: normally the previous segment's own
prompts, or a blend still in progress when the switch interrupted it (live switches in quick succession).
"""

from __future__ import annotations

import operator
from bisect import bisect_right
from typing import Any, Iterable, Literal

from pydantic import (BaseModel, ConfigDict, Field, PrivateAttr, StrictBool, StrictInt, ValidationError,
                      field_validator, model_validator)

from alaya_errors import field_error
from prompt_presets import BlendMode, Conditioning, PromptSpec, WeightedPrompt, resolve_prompt
from timeline.schedule.easing import EASINGS, Easing
from timeline.schedule.errors import ScheduleError, schedule_error
from timeline.schedule.jsondoc import load_json

SCHEDULE_VERSION = 1
# Ten hours at 30 fps: far beyond any prepared timeline, yet a live session that records its switches into
# its schedule for hours stays valid. Anything larger is a typo.
MAX_FRAMES = 1_080_000
MAX_PROMPTS = 16                # per segment
TransitionKind = Literal["cut", "linear", "slerp"]


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Transition(_Frozen):
    """How a segment is entered. `kind` cut = instant; linear / slerp blend over `frames` frames (the renderer
    mixes prompt embeddings linearly or spherically), with `easing` shaping the weight over time."""

    kind: TransitionKind = "cut"
    frames: StrictInt = Field(0, ge=0, le=MAX_FRAMES)
    easing: Easing = "linear"

    @model_validator(mode="before")
    @classmethod
    def _shorthand(cls, data: Any) -> Any:
        if isinstance(data, str):                     # "cut"
            return {"kind": data}
        if isinstance(data, int) and not isinstance(data, bool):   # frames: 0 = cut, n = linear blend
            return {"kind": "linear" if data else "cut", "frames": data}
        return data

    @model_validator(mode="after")
    def _frames_fit_kind(self) -> "Transition":
        if self.kind == "cut" and self.frames:
            raise field_error(f"a cut takes no frames (got {self.frames}); use kind 'linear' or 'slerp' to blend",
                              "frames")
        if self.kind != "cut" and not self.frames:
            raise field_error(f"a {self.kind!r} transition needs at least 1 frame", "frames")
        return self

    @property
    def is_cut(self) -> bool:
        return self.kind == "cut"


CUT = Transition()


class Segment(_Frozen):
    start: StrictInt = Field(ge=0, le=MAX_FRAMES, description="first frame of the segment (and of its transition)")
    prompts: tuple[PromptSpec, ...] = Field(min_length=1, max_length=MAX_PROMPTS)
    mode: BlendMode = Field("linear", description="how the segment's own prompts mix when it has several")
    transition: Transition = CUT

    @model_validator(mode="before")
    @classmethod
    def _prompt_shorthand(cls, data: Any) -> Any:
        if isinstance(data, dict) and "prompt" in data:
            if "prompts" in data:
                raise field_error("give 'prompt' or 'prompts', not both", "prompt")
            data = {**data, "prompts": [data["prompt"]]}
            del data["prompt"]
        return data

    @model_validator(mode="after")
    def _weights(self) -> "Segment":
        if sum(p.weight for p in self.prompts) <= 0:
            raise field_error("the weights sum to 0", "prompts")
        return self


class Schedule(_Frozen):
    version: StrictInt = Field(SCHEDULE_VERSION, description="format version; this build reads 1")
    fps: float = Field(30.0, gt=0, le=1000, allow_inf_nan=False, description="frames per second of the timeline")
    length: StrictInt | None = Field(None, ge=1, le=MAX_FRAMES, description="frames; None = the last segment holds")
    loop: StrictBool = Field(False, description="frames past `length` wrap to 0 (needs a length)")
    segments: tuple[Segment, ...] = Field(min_length=1)
    description: str | None = Field(None, max_length=2000, description="what this schedule is, for people")

    # per segment: its own prompts as a Conditioning, and the conditioning its transition blends from
    _targets: list[Conditioning] = PrivateAttr(default_factory=list)
    _sources: list[Conditioning | None] = PrivateAttr(default_factory=list)
    _starts: list[int] = PrivateAttr(default_factory=list)

    @field_validator("version")
    @classmethod
    def _version(cls, v: int) -> int:
        if v != SCHEDULE_VERSION:
            raise ValueError(f"unknown schedule version {v}; this build reads version {SCHEDULE_VERSION}")
        return v

    @model_validator(mode="after")
    def _timeline(self) -> "Schedule":
        segs = self.segments
        if segs[0].start != 0:
            raise field_error(f"the first segment must start at frame 0 (got {segs[0].start})", "segments[0].start")
        if not segs[0].transition.is_cut:
            raise field_error("the first segment has nothing to blend from; use a cut", "segments[0].transition")
        for i in range(1, len(segs)):
            if segs[i].start <= segs[i - 1].start:
                raise field_error(f"{segs[i].start} is not after segments[{i - 1}].start ({segs[i - 1].start}); "
                            "segments must be sorted with distinct starts", f"segments[{i}].start")
        if self.length is not None:
            if segs[-1].start >= self.length:
                raise field_error(f"{segs[-1].start} is at or past the schedule's length ({self.length} frames)",
                            f"segments[{len(segs) - 1}].start")
            for i, seg in enumerate(segs):
                if seg.transition.frames > self.length:
                    raise field_error(f"{seg.transition.frames} is longer than the whole schedule "
                                      f"({self.length} frames)",
                                f"segments[{i}].transition.frames")
        if self.loop and self.length is None:
            raise field_error("a looping schedule needs a length", "loop")
        self._starts = [s.start for s in segs]
        self._targets = [Conditioning(tuple(p for p in (q.resolve() for q in s.prompts) if p.weight > 0), s.mode)
                         for s in segs]
        self._sources = [None]
        for seg in segs[1:]:                    # in order: frame start-1 only needs earlier segments
            self._sources.append(self._evaluate(seg.start - 1))
        return self

    # ---- frame → conditioning -------------------------------------------------------------------------------

    def conditioning_at(self, frame: int) -> Conditioning:
        """The conditioning of timeline frame `frame` (≥ 0). Past `length`: wraps if `loop`, else the last
        segment holds. Deterministic: a pure function of the schedule and the frame."""
        return self._evaluate(self._wrap(frame))

    def _evaluate(self, frame: int) -> Conditioning:
        k = bisect_right(self._starts, frame) - 1
        seg = self.segments[k]
        into = frame - seg.start                     # 0 on the segment's first frame
        if seg.transition.is_cut or into >= seg.transition.frames:
            return self._targets[k]
        t = EASINGS[seg.transition.easing]((into + 1) / seg.transition.frames)
        if t >= 1.0:
            return self._targets[k]
        source, kind = self._sources[k], seg.transition.kind
        assert source is not None and kind != "cut"   # only the first segment has no source: a cut (validated)
        return mix(source, self._targets[k], t, kind)

    def _wrap(self, frame: int) -> int:
        try:
            frame = operator.index(frame)
        except TypeError:
            raise ScheduleError(f"a frame is a whole number, got {frame!r}", "frame") from None
        if frame < 0:
            raise ScheduleError(f"frames start at 0, got {frame}", "frame")
        if self.loop:
            assert self.length is not None       # validated: a looping schedule has a length
            return frame % self.length
        return frame

    def segment_index_at(self, frame: int) -> int:
        return bisect_right(self._starts, self._wrap(frame)) - 1

    def segment_at(self, frame: int) -> Segment:
        return self.segments[self.segment_index_at(frame)]

    def boundaries(self) -> tuple[int, ...]:
        """Start frames of the segments."""
        return tuple(self._starts)

    def describe(self) -> str:
        """'8 segments, 637 frames' (what `schedule validate` prints)."""
        n = f"{len(self.segments)} segment{'s' if len(self.segments) != 1 else ''}"
        if self.length is None:
            return f"{n}, open-ended (the last segment holds from frame {self._starts[-1]})"
        return f"{n}, {self.length} frames" + (", looping" if self.loop else "")

    # ---- building and editing -------------------------------------------------------------------------------

    @classmethod
    def from_json(cls, data: dict | str, where: str | None = None) -> "Schedule":
        """Validate a schedule document (dict or JSON text); errors are one-line `ScheduleError`s."""
        if isinstance(data, str):
            data = load_json(data, where)
        if not isinstance(data, dict):
            raise ScheduleError(f"a schedule is a JSON object, got {type(data).__name__}", where)
        if "version" not in data:
            raise ScheduleError(f"version: missing (this build reads version {SCHEDULE_VERSION})", where)
        return cls.build(data, where)

    @classmethod
    def build(cls, data: dict, where: str | None = None) -> "Schedule":
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            raise schedule_error(exc, where) from None

    def to_json(self) -> dict:
        return self.model_dump(mode="json", exclude_none=True)

    @classmethod
    def single(cls, text_or_name: str, fps: float = 30.0) -> "Schedule":
        """One prompt for ever: a preset name or free text."""
        if not isinstance(text_or_name, str) or not text_or_name.strip():
            raise ScheduleError("empty prompt", "prompt")
        spec = PromptSpec.from_weighted(resolve_prompt(text_or_name.strip(), 1.0))
        return cls.build({"fps": fps, "segments": [{"start": 0, "prompts": [spec]}]})

    def switch_at(self, frame: int, prompts: Any, transition: Any = None,
                  mode: BlendMode = "linear") -> "Schedule":
        """A copy that switches to `prompts` at `frame`: segments starting at or after `frame` are dropped and
        the new one appended. `prompts`: a name/text, a Conditioning, or a list of names/texts, PromptSpecs,
        WeightedPrompts, dicts or objects with text/preset/weight. `transition`: a Transition, its dict, a kind
        name, or frames (0 = cut, n = a `mode` blend). At frame 0 there is nothing to blend from: always a cut."""
        frame = operator.index(frame)
        if frame < 0:
            raise ScheduleError(f"frames start at 0, got {frame}", "frame")
        if isinstance(transition, int) and not isinstance(transition, bool) and transition > 0:
            transition = {"kind": mode, "frames": transition}
        new = {"start": frame, "prompts": _prompt_list(prompts), "mode": mode,
               "transition": CUT if frame == 0 or transition is None else transition}
        kept = [s for s in self.segments if s.start < frame]
        return self.build({"version": self.version, "fps": self.fps, "length": self.length, "loop": self.loop,
                           "segments": [*kept, new]})


def mix(source: Conditioning, target: Conditioning, t: float, mode: BlendMode) -> Conditioning:
    """(1 - t) · source + t · target, prompt by prompt (the same prompt on both sides adds up)."""
    weights: dict[tuple[str, str | None], float] = {}
    for side, scale in ((source, 1.0 - t), (target, t)):
        for p in side.prompts:
            key = (p.text, p.preset)
            weights[key] = weights.get(key, 0.0) + scale * p.weight
    return Conditioning(tuple(WeightedPrompt(text, w, preset) for (text, preset), w in weights.items() if w > 0),
                        mode)


def _prompt_list(prompts: Any) -> list:
    if isinstance(prompts, (str, PromptSpec, WeightedPrompt, dict)):
        prompts = [prompts]
    elif isinstance(prompts, Conditioning):
        prompts = prompts.prompts
    if not isinstance(prompts, Iterable):
        raise ScheduleError(f"expected a prompt or a list of prompts, got {type(prompts).__name__}", "prompts")
    out = []
    for p in prompts:
        out.append(PromptSpec.from_weighted(p) if isinstance(p, WeightedPrompt) else p)
    return out
