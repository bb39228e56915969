"""A show's tempo: beats per minute and where the beats fall, on the wall clock, so that a switch can be placed
ahead of time on the frame the studio sends on the next beat or bar (docs/presenting.md, "On the beat").

The grid is kept in wall-clock seconds, not timeline frames: a recorded source played in a loop starts its frames
again at each pass, and an external clock (OSC `/alaya/beat`, MIDI clock in the page) ticks in time, not frames.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Literal

from alaya_errors import UserError

MIN_BPM, MAX_BPM = 20.0, 300.0
MAX_BEATS_PER_BAR = 16
Unit = Literal["beat", "bar"]


class TempoError(UserError):
    pass


@dataclass(frozen=True)
class Tempo:
    bpm: float
    anchor: float                 # wall-clock seconds of a downbeat (the first beat of a bar)
    beats_per_bar: int = 4

    def __post_init__(self) -> None:
        if not (isinstance(self.bpm, (int, float)) and math.isfinite(self.bpm) and MIN_BPM <= self.bpm <= MAX_BPM):
            raise TempoError(f"bpm must be within {MIN_BPM:g}..{MAX_BPM:g}, got {self.bpm!r}", "tempo")
        if not 1 <= self.beats_per_bar <= MAX_BEATS_PER_BAR:
            raise TempoError(f"beats_per_bar must be within 1..{MAX_BEATS_PER_BAR}, got {self.beats_per_bar}",
                             "tempo")

    @property
    def period(self) -> float:
        """Seconds per beat."""
        return 60.0 / self.bpm

    def step(self, unit: Unit) -> float:
        return self.period * (self.beats_per_bar if unit == "bar" else 1)

    def next(self, after: float, unit: Unit = "beat") -> float:
        """The first beat (or downbeat) at or after `after`, in wall-clock seconds."""
        step = self.step(unit)
        return self.anchor + math.ceil((after - self.anchor) / step - 1e-9) * step

    def beat(self, at: float, downbeat: bool = False) -> "Tempo":
        """An external clock ticked at `at`: the grid moves onto it, keeping its place in the bar unless the tick
        is a downbeat."""
        if downbeat:
            return replace(self, anchor=at)
        beats = round((at - self.anchor) / self.period)
        return replace(self, anchor=at - (beats % self.beats_per_bar) * self.period)
