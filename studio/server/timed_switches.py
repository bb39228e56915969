"""Switches timed to a moment (a beat, a bar, an OSC timetag), kept on their moment as it nears.

A timed switch is placed on the timeline at once (studio/server/commands.py, `_switch_timed`): on the frame the
session is expected to send at its moment, less the owner's screen delay, so the presenter sees the block ahead
of time. That frame is an extrapolation from the last frame sent, up to a bar ahead (2 s at 120 BPM), and what
happens after it moves the moment's frame: a slow frame or a stalled encoder delays every frame after it, the
sending rate drifts from the one measured, the owner's page reports a new screen delay. So before each chunk the
worker places every switch whose block has not been rendered yet again, from the newest frame sent and the
newest screen delay (`TimedSwitches.again`): the last placement is at most a chunk ahead, where the
extrapolation is a few frames long.

A block the visitor edited since (the timeline editor, another switch over it) is their word: it is left where
it is and forgotten. Kept: at most `LIMIT` switches, the latest ones; the older ones stay where they were placed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from timeline.schedule.live import LiveTimeline
from timeline.schedule.model import Segment

LIMIT = 32      # switches kept on their moment; a presenter's show has a few within the next bar
# frames the moment must have moved by before its block moves: a target near x.5 frames would otherwise move the
# block back and forth between two frames, and the page fetch the schedule each time
HYSTERESIS = 0.75


@dataclass
class TimedSwitch:
    when: float             # Unix time at which the first frame of the new style is due on the owner's screen
    block: Segment          # its block as the timeline holds it now


@dataclass
class TimedSwitches:
    pending: list[TimedSwitch] = field(default_factory=list)

    def placed(self, when: float, timeline: LiveTimeline, frame: int) -> None:
        """A switch due on screen at `when` was just placed at timeline `frame`."""
        block = timeline.schedule.segment_at(frame)
        if block.start == frame:
            self.pending = [*self.pending, TimedSwitch(when, block)][-LIMIT:]

    def again(self, first: int, timeline: LiveTimeline, frame_at: Callable[[float], float | None],
              lead_s: float) -> list[int]:
        """Before a chunk that begins at `first` (the next frame not rendered): each switch still to render moves
        to the frame sent at its moment less `lead_s`, never before `first`. → the frames moved to."""
        moved, kept = [], []
        length = timeline.loop_length()
        for switch in self.pending:
            if switch.block.start < first:      # rendered (or, on a loop, in the next pass): it is where it is
                continue
            target = frame_at(switch.when - lead_s)
            if target is None or (length and round(target) >= length):
                kept.append(switch)             # no frame sent yet, or the moment is past a loop's wrap: as placed
                continue
            to = max(first, round(target))
            if to == switch.block.start or abs(target - switch.block.start) < HYSTERESIS:
                kept.append(switch)
                continue
            block = timeline.move(switch.block, to)
            if block is not None:
                moved.append(to)
                kept.append(TimedSwitch(switch.when, block))
            elif any(seg == switch.block for seg in timeline.schedule.segments):
                kept.append(switch)             # its neighbours are in the way now: it stays, and may move later
        self.pending = kept
        return moved
