"""A schedule from what was played: one conditioning per frame (a take's frames) back into blocks a person can edit.

A transition plays as one conditioning per frame, each a step of its ramp; cut at every change that would be
one block per transition frame (a take with two 16-frame switches: 33 blocks). Here a run of frames that is
exactly a ramp — every frame the schedule's own `mix` of the frame before the run and the run's last frame,
weighted by one of the easings at (j + 1) / L — becomes one block with that transition, so its ramp is drawn
inside it. Exactly: the schedule built gives every frame the very conditioning it was played with (checked
before it is returned), so a re-render lands every switch and every step of a transition on the same frame.
Frames that are no ramp (a transition interrupted by the next switch) stay one block per change.
"""

from __future__ import annotations

from typing import Sequence

from prompt_presets import Conditioning
from timeline.schedule.easing import EASINGS
from timeline.schedule.model import PromptSpec, Schedule, mix

MAX_RAMP = 4096            # longest transition looked for (frames); a longer one stays one block per step


def as_played(conditionings: Sequence[Conditioning], fps: float) -> Schedule:
    """The schedule that plays `conditionings` frame for frame, each run of equal frames one block and each
    ramp one block with its transition."""
    conds = list(conditionings)
    segments = [_segment(0, conds[0])]
    k = 1
    while k < len(conds):
        if conds[k] == conds[k - 1]:
            k += 1
            continue
        ramp = _ramp(conds, k)
        if ramp is None:
            segments.append(_segment(k, conds[k]))
            k += 1
        else:
            frames, easing = ramp
            segments.append(_segment(k, conds[k + frames - 1],
                                     {"kind": conds[k].mode, "frames": frames, "easing": easing}))
            k += frames
    schedule = _build(segments, conds, fps)
    # each block's ramp and first held frame, as the schedule plays them (the frames after hold what that one
    # plays, as the recording did): never different, since each ramp was checked frame by frame with `mix`
    checked = (f for seg in schedule.segments
               for f in range(seg.start, min(seg.start + seg.transition.frames + 1, len(conds))))
    if any(schedule.conditioning_at(f) != conds[f] for f in checked):
        schedule = _build([_segment(k, c) for k, c in enumerate(conds) if k == 0 or c != conds[k - 1]], conds, fps)
    return schedule


def _ramp(conds: list[Conditioning], k: int) -> tuple[int, str] | None:
    """(frames, easing) of the ramp that starts at frame `k` (a change), or None. A ramp of L frames changes on
    every frame, blending from frame k-1 into frame k+L-1, which its last frame plays exactly and the frames after
    it hold (or the take ends there). Only that whole run is tried: a part of a ramp may happen to fit too (a
    transition cut short by the next switch), and it would be a block no one made."""
    end = k
    while end + 1 < len(conds) and end + 1 - k < MAX_RAMP and conds[end + 1] != conds[end]:
        end += 1
    frames, source, target, kind = end - k + 1, conds[k - 1], conds[end], conds[k].mode
    if frames < 2 or (end + 1 < len(conds) and conds[end + 1] != target):
        return None
    for name, ease in EASINGS.items():
        if all(mix(source, target, ease((j + 1) / frames), kind) == conds[k + j] for j in range(frames - 1)):
            return frames, name
    return None


def _segment(start: int, cond: Conditioning, transition: dict | None = None) -> dict:
    seg = {"start": start, "mode": cond.mode,
           "prompts": [PromptSpec.from_weighted(p).model_dump(exclude_none=True) for p in cond.prompts]}
    return {**seg, "transition": transition} if transition else seg


def _build(segments: list[dict], conds: list[Conditioning], fps: float) -> Schedule:
    return Schedule.build({"fps": fps, "length": max(1, len(conds)), "segments": segments})
