"""Player input for live sources (the built-in engine, external engines)."""

from __future__ import annotations

from dataclasses import dataclass, replace


@dataclass(frozen=True)
class PlayerInput:
    """Controls applied at the next engine tick.

    steer: -1 (full left) .. +1 (full right); throttle and brake: 0 .. 1;
    reset: put the kart back on the track at the last checkpoint;
    handbrake: the brake brings the kart to rest and holds it there (the Space key); without it a brake held at
    a standstill reverses (the Down key), as in most kart games.
    """

    steer: float = 0.0
    throttle: float = 0.0
    brake: float = 0.0
    reset: bool = False
    handbrake: bool = False

    def clamped(self) -> "PlayerInput":
        def clamp(v: float, lo: float, hi: float) -> float:
            return float(min(hi, max(lo, v)))

        return PlayerInput(clamp(self.steer, -1, 1), clamp(self.throttle, 0, 1),
                           clamp(self.brake, 0, 1), bool(self.reset), bool(self.handbrake))


def newer_input(waiting: PlayerInput | None, new: PlayerInput) -> PlayerInput:
    """`new` in place of the input still `waiting` to be taken, keeping its reset: a quick R tap arrives as a press
    and a release within one frame, and the release must not swallow the press (latest input wins otherwise)."""
    return replace(new, reset=True) if waiting is not None and waiting.reset and not new.reset else new
