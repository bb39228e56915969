"""The live timeline: the schedule a live session plays, and the edits made to it while it plays (docs/ui.md).

A rollout asks it `conditioning_at(frame)` like any schedule (`studio.rollout.ConditioningTimeline`). Edits:
- `switch`: a prompt switch made now, at the frame on screen. Close switches coalesce into one block; on a
  loop the switch takes the whole loop, from the next pass on.
- `patch`: a switch placed at a timeline frame (the timeline editor's), future or past.
- `replace`: a whole new schedule.
- `advance`: the playhead reached `frame`; on a loop's wrap the next pass's schedule takes over.

Not thread-safe: a session's worker is its one writer (edits apply between chunks). Readers on other threads
read `schedule`, which is replaced whole.
"""

from __future__ import annotations

from bisect import bisect_left

from prompt_presets import Conditioning
from studio.schedule.errors import ScheduleError
from studio.schedule.model import Schedule

MAX_CARRIED_PASSES = 64          # a transition longer than 64 passes of its loop simply ends there


class LiveTimeline:
    def __init__(self, schedule: Schedule, source_loop: int | None = None):
        self.schedule = schedule
        # frames per pass of a recorded source played in a loop (None: not looping); the session keeps it current
        self.source_loop = source_loop
        self._passes: list[Schedule] = []   # what the passes to come play, after a switch on a loop
        self._position = 0                  # where the playhead was in the loop at the last advance()

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

    def switch(self, frame: int, conditioning: Conditioning, transition: int) -> bool:
        """A switch made live at `frame` (the frame played next); → whether it took the whole loop."""
        length = self.loop_length()
        if length:
            self.schedule, self._passes = self._loop_switch(frame % length, length, conditioning, transition)
        else:
            self.schedule = self._switched(self.schedule, self._coalesced(frame), conditioning, transition)
        return bool(length)

    def patch(self, frame: int, conditioning: Conditioning, transition: int) -> None:
        """A switch at timeline `frame` (wrapped into a looping schedule); the passes to come are unchanged."""
        self.schedule = self._switched(self.schedule, self._wrapped(frame), conditioning, transition)

    def replace(self, schedule: Schedule) -> None:
        self.schedule, self._passes = schedule, []

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

    def _wrapped(self, frame: int) -> int:
        s = self.schedule
        return frame % s.length if s.loop and s.length else frame

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
    def _switched(schedule: Schedule, frame: int, conditioning: Conditioning, transition: int) -> Schedule:
        refuse_past_the_end(schedule, frame)
        return schedule.switch_at(frame, conditioning, transition, mode=conditioning.mode)

    def _loop_switch(self, position: int, length: int, conditioning: Conditioning,
                     transition: int) -> tuple[Schedule, list[Schedule]]:
        """A live switch on a loop (docs/ui.md, "Live switches on loops"): it blends in from the frame on screen
        over its transition, then holds for the whole loop. → (the rest of this pass, the passes after): a
        transition that runs past the loop's end carries on into the next pass, and the last pass — the whole
        loop in the new prompts — stays."""
        mode = conditioning.mode
        now = self._switched(self.schedule, position, conditioning, transition)
        whole = self.schedule.switch_at(0, conditioning, mode=mode)
        passes, last, left = [], now, position + transition - length      # transition frames left at the wrap
        while transition > 0 and left > 0 and len(passes) < MAX_CARRIED_PASSES:
            at_wrap = last.conditioning_at(length - 1)                      # where the blend stands at the wrap
            last = whole.switch_at(0, at_wrap, mode=mode).switch_at(1, conditioning, left, mode=mode)
            passes.append(last)
            left -= length - 1
        return now, [*passes, whole]


def refuse_past_the_end(schedule: Schedule, frame: int) -> None:
    """The one rule for a switch past the end of a fixed-length schedule that does not loop: refused, as the
    schedule format refuses a segment starting at or past its length (same message)."""
    if schedule.length is not None and not schedule.loop and frame >= schedule.length:
        index = bisect_left(schedule.boundaries(), frame)       # where the new segment would have gone
        raise ScheduleError(f"segments[{index}].start: {frame} is at or past the schedule's length "
                            f"({schedule.length} frames)")
