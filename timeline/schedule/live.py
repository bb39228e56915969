"""The live timeline: the schedule a live session plays, and the edits made to it while it plays (docs/ui.md).

A rollout asks it `conditioning_at(frame)` like any schedule (`timeline.rollout.ConditioningTimeline`). Edits:
- `switch`: a prompt switch made now, at the frame on screen. Close switches coalesce into one block, a switch
  to what the block already plays adds none; on a loop the switch takes the whole loop, from the next pass on.
  On a prepared timeline (several blocks, more to come) it holds until the next block and deletes none: it
  never coalesces with, nor starts on the first frame of, a block the visitor applied.
- `patch`: a switch placed at a timeline frame (the timeline editor's), future or past.
- `move`: a block placed ahead of its moment begins a few frames earlier or later (a timed switch placed again
  as its moment nears, studio/server/timed_switches.py).
- `replace`: a whole new schedule; one the visitor applies mid-stream begins at the frame on screen
  (`begun_at`).
- `advance`: the playhead reached `frame`; on a loop's wrap the next pass's schedule takes over.

Not thread-safe: a session's worker is its one writer (edits apply between chunks). Once it calls
`bind_writer`, a write from any other thread raises `CrossThreadWrite` instead of racing the render. Readers on
other threads read `schedule`, which is replaced whole.
"""

from __future__ import annotations

import threading
from typing import NamedTuple

from prompt_presets import Conditioning
from timeline.schedule.model import Schedule, Segment

MAX_CARRIED_PASSES = 64          # a transition longer than 64 passes of its loop simply ends there


class Switched(NamedTuple):
    """What a live switch did: `whole_loop` when it took the whole loop; `until` when it is an override on a
    prepared timeline, the frame (within the loop, on a loop) where the timeline's next block takes over again
    (the loop's length: at the wrap). `until` equal to the switch's own frame: a block begins there and the one
    after it at once, so the switch had no frame to play and changed nothing."""

    whole_loop: bool = False
    until: int | None = None


class CrossThreadWrite(RuntimeError):
    """A thread other than the timeline's writer tried to change it (a bug, never a visitor's doing)."""


class LiveTimeline:
    def __init__(self, schedule: Schedule, source_loop: int | None = None):
        self.schedule = schedule
        # frames per pass of a recorded source played in a loop (None: not looping); the session keeps it current
        self.source_loop = source_loop
        self._passes: list[Schedule] = []   # what the passes to come play, after a switch on a loop
        self._position = 0                  # where the playhead was in the loop at the last advance()
        self._kept = frozenset(schedule.segments)   # the blocks the visitor applied: no live switch deletes one

    def bind_writer(self) -> None:
        """From now on only the calling thread may change the timeline (a live session's worker, as it starts)."""
        object.__setattr__(self, "_writer", threading.get_ident())

    def __setattr__(self, name: str, value) -> None:
        writer = self.__dict__.get("_writer")
        if writer is not None and writer != threading.get_ident():
            raise CrossThreadWrite(f"the live timeline's {name.lstrip('_')} was written from "
                                   f"{threading.current_thread().name}, not from its session's worker")
        object.__setattr__(self, name, value)

    def conditioning_at(self, frame: int) -> Conditioning:
        return self.schedule.conditioning_at(frame)

    def to_json(self) -> dict:
        """The schedule as it plays now, live switches included (what the session's schedule route saves)."""
        return self.schedule.to_json()

    def loop_length(self) -> int | None:
        """Frames per pass when the timeline loops: a looping schedule's length, else the recorded source's
        when it plays in a loop; None when nothing loops (a live engine on an open timeline)."""
        if self.schedule.loop and self.schedule.length:
            return self.schedule.length
        return self.source_loop or None

    # ---- edits ---------------------------------------------------------------------------------------------

    def switch(self, frame: int, conditioning: Conditioning, transition: int) -> Switched:
        """A switch made live at `frame` (the frame played next); → what it did (`Switched`)."""
        length = self.loop_length()
        if self._prepared(frame, length):
            return Switched(until=self._override(frame, length, conditioning, transition))
        if length:
            self.schedule, self._passes = self._loop_switch(frame % length, length, conditioning, transition)
        elif not self._plays(frame, conditioning):
            self.schedule = self._switched(self.schedule, *self._placed(frame, conditioning, transition),
                                           conditioning)
        return Switched(whole_loop=bool(length))

    def patch(self, frame: int, conditioning: Conditioning, transition: int) -> None:
        """A switch at timeline `frame` (wrapped into a looping schedule); the passes to come are unchanged. An
        edit: every block the timeline then holds is the visitor's."""
        self.schedule = self._switched(self.schedule, self._wrapped(frame), transition, conditioning)
        self._kept = frozenset(self.schedule.segments)

    def move(self, block: Segment, to: int) -> Segment | None:
        """The block `block` begins at timeline frame `to` instead. Only while the timeline still holds it as it
        was (an edit since replaced it: that edit is the visitor's word) and `to` stays after the block before it
        and before the one after it (or the schedule's end); never the first block. → the block as moved, None when it
        was not."""
        segments = self.schedule.segments
        i = next((k for k, seg in enumerate(segments) if seg == block), None)
        if not i or to == block.start:
            return None
        after = segments[i + 1].start if i + 1 < len(segments) else self.schedule.length
        if not segments[i - 1].start < to < (after if after is not None else to + 1):
            return None
        doc = self.schedule.to_json()
        doc["segments"][i] = {**doc["segments"][i], "start": to}
        self.schedule = Schedule.build(doc, "schedule")
        moved = self.schedule.segments[i]
        if block in self._kept:
            self._kept = (self._kept - {block}) | {moved}
        return moved

    def replace(self, schedule: Schedule, now: int | None = None) -> None:
        """A whole new schedule. `now`: the frame on screen, when the visitor applies a whole schedule (Eight
        worlds, Load, Import) rather than editing the one that plays: see `begun_at`."""
        self.schedule, self._passes = (schedule if now is None else begun_at(schedule, now)), []
        self._kept = frozenset(self.schedule.segments)

    def advance(self, frame: int) -> bool:
        """The next frame to play is `frame`; → True when that began a new pass with a schedule of its own."""
        length = self.loop_length()
        position = frame % length if length else 0
        wrapped, self._position = position < self._position, position
        if wrapped and self._passes:
            self.schedule = self._passes.pop(0)       # the last one (the whole loop) then stays
            return True
        return False

    # ---- the rules -----------------------------------------------------------------------------------------

    def _applied(self) -> Schedule:
        """The schedule the passes to come play: the last queued pass, else the one that plays."""
        return self._passes[-1] if self._passes else self.schedule

    def _prepared(self, frame: int, length: int | None) -> bool:
        """Whether a live switch at `frame` lands in a timeline of several blocks with more of it to come: a
        loop of several blocks (Eight worlds looping), or a block ahead of `frame`. Such a timeline is kept
        (docs/ui.md, "Live switches on a prepared timeline")."""
        if len(self._applied().segments) < 2:
            return False
        return bool(length) or any(seg.start > frame for seg in self.schedule.segments)

    def _override(self, frame: int, length: int | None, conditioning: Conditioning, transition: int) -> int | None:
        """The switch plays from `frame` until the next block of the timeline begins, deleting none; on a loop
        only for this pass, and the next pass plays the timeline as it was applied. → where the override ends
        (`Switched.until`), None when the block on screen already plays `conditioning`."""
        position = frame % length if length else frame
        if self._plays(position, conditioning):
            return None
        applied = self._applied()
        at, transition = self._placed(position, conditioning, transition)
        ahead = [seg for seg in self.schedule.to_json()["segments"] if seg["start"] > position]
        until = ahead[0]["start"] if ahead else length
        assert until is not None            # _prepared: without a loop there is a block ahead
        if at >= until:                     # a one-frame block on screen, the next one right after it
            return at
        doc = self._switched(self.schedule, at, transition, conditioning).to_json()
        self.schedule = Schedule.build({**doc, "segments": [*doc["segments"], *ahead]}, "schedule")
        if length:
            self._passes = [applied]
        return until

    def _placed(self, frame: int, conditioning: Conditioning, transition: int) -> tuple[int, int]:
        """(first frame, transition frames) of the block a live switch at `frame` makes: a blend drag's steps ramp
        one block (`_dragged`), any other switch starts where `_start` says with its own transition."""
        if (start := self._dragged(frame, conditioning)) is not None:
            return start, self._wrapped(frame) - start + 1
        return self._start(frame), transition

    def _dragged(self, frame: int, conditioning: Conditioning) -> int | None:
        """Where the block begins that a blend drag's next step continues, or None when the switch is no such step.
        A step only reweighs the styles of a live-switched block (the two of them together name at most two
        styles, one of them a blend) and comes less than a second after that block's ramp ends. The block then
        ramps from where it began to this step's weights at this frame: a drag of any length is one block, its
        ramp the drag (not one block per second, each a cut)."""
        at = self._wrapped(frame)
        block = self.schedule.segment_at(at)
        ramp_end = block.start + (0 if block.transition.is_cut else block.transition.frames)
        if (block.start == 0 or at <= block.start or at - ramp_end >= round(self.schedule.fps)
                or (len(self._kept) >= 2 and block in self._kept) or block.mode != conditioning.mode
                or (self.schedule.length is not None and at >= self.schedule.length)):
            return None
        styles = {(p.text, p.preset) for p in (*conditioning.prompts, *(q.resolve() for q in block.prompts))}
        blend = len(conditioning.prompts) > 1 or len(block.prompts) > 1
        return block.start if blend and len(styles) <= 2 else None

    def _start(self, frame: int) -> int:
        """Where a live switch at `frame` starts its block. A block the visitor applied, in a timeline of several,
        is never replaced: the switch neither coalesces with it nor starts on its first frame (it starts one
        frame later, so the block keeps its start). Any other block (an earlier live switch, a lone block)
        coalesces as `_coalesced` says."""
        frame = self._wrapped(frame)
        block = self.schedule.segment_at(frame)
        if len(self._kept) < 2 or block not in self._kept:
            return self._coalesced(frame)
        return frame + 1 if frame == block.start else frame

    def _wrapped(self, frame: int) -> int:
        s = self.schedule
        return frame % s.length if s.loop and s.length else frame

    def _plays(self, frame: int, conditioning: Conditioning) -> bool:
        """Whether the block `frame` falls in already plays `conditioning` (or blends into it): a switch to it
        (the same tile again, a picker set to what it shows) changes nothing and adds no block."""
        block = self.schedule.segment_at(self._wrapped(frame))
        return Conditioning(tuple(p.resolve() for p in block.prompts), block.mode) == conditioning

    def _coalesced(self, frame: int) -> int:
        """A switch that lands while the block it falls in is still in its transition, or less than a second
        after that block began (a slider drag, quick clicks), replaces that block's prompts instead of adding a
        block; the blend then runs on from where that block began."""
        frame = self._wrapped(frame)
        block = self.schedule.segment_at(frame)
        if block.start > 0 and frame - block.start < max(block.transition.frames, round(self.schedule.fps)):
            return block.start
        return frame

    @staticmethod
    def _switched(schedule: Schedule, frame: int, transition: int, conditioning: Conditioning) -> Schedule:
        return past_the_end(schedule, frame, transition).switch_at(frame, conditioning, transition,
                                                                  mode=conditioning.mode)

    def _loop_switch(self, position: int, length: int, conditioning: Conditioning,
                     transition: int) -> tuple[Schedule, list[Schedule]]:
        """A live switch on a loop (docs/ui.md, "Live switches on loops"): it blends in from the frame on screen
        over its transition, then holds for the whole loop. → (the rest of this pass, the passes after): a
        transition that runs past the loop's end carries on into the next pass, and the last pass — the whole
        loop in the new prompts — stays."""
        mode = conditioning.mode
        dragged = self._dragged(position, conditioning)            # a blend drag's steps: one block, its ramp
        at, transition = (position, transition) if dragged is None else (dragged, position - dragged + 1)
        now = self._switched(self.schedule, at, transition, conditioning)
        whole = self.schedule.switch_at(0, conditioning, mode=mode)
        passes: list[Schedule] = []
        last, left = now, at + transition - length                       # transition frames left at the wrap
        while transition > 0 and left > 0 and len(passes) < MAX_CARRIED_PASSES:
            at_wrap = last.conditioning_at(length - 1)                      # where the blend stands at the wrap
            last = whole.switch_at(0, at_wrap, mode=mode).switch_at(1, conditioning, left, mode=mode)
            passes.append(last)
            left -= length - 1
        return now, [*passes, whole]


def past_the_end(schedule: Schedule, frame: int, transition: int) -> Schedule:
    """The one rule past the end of a fixed-length schedule that does not loop (docs/ui.md, "Past the end"): there
    the last segment holds, and a switch placed there is never refused: it extends the schedule, whose length
    grows to the switch's frame plus its transition (at least one frame), so the switch plays in full and
    holds. → the schedule the switch is made on (the same one when `frame` is within its length)."""
    if schedule.length is None or schedule.loop or frame < schedule.length:
        return schedule
    return Schedule.build({**schedule.to_json(), "length": frame + max(transition, 1)})


def begun_at(schedule: Schedule, now: int) -> Schedule:
    """A schedule applied at frame `now` mid-stream would play from wherever `now` falls in it: past its length
    only its last segment, within it the segments already passed skipped (Eight worlds applied at frame 300
    would open on Polar). It begins now instead, whatever `now` is: every segment after the first `now` frames
    later (the first one plays from frame 0 until then) and its length, if it has one, as much longer. A loop
    plays as it is, from where the playhead is in it (its frames wrap, so no start can be moved past them)."""
    if schedule.loop or now <= 0 or (len(schedule.segments) < 2 and schedule.length is None):
        return schedule
    doc = schedule.to_json()
    first, *rest = doc["segments"]
    return Schedule.build({**doc, **({"length": schedule.length + now} if schedule.length else {}),
                           "segments": [first, *({**seg, "start": seg["start"] + now} for seg in rest)]},
                          "schedule")
