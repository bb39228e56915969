"""Easing curves for transitions: progress t in (0, 1] → eased weight of the new prompts in [0, 1].

Each curve is 0 at t=0 and 1 at t=1 and monotone, so the last frame of a transition is exactly the new prompts.
"""

from __future__ import annotations

from typing import Callable, Literal

Easing = Literal["linear", "ease_in", "ease_out", "ease_in_out", "smoothstep"]


def linear(t: float) -> float:
    return t


def ease_in(t: float) -> float:
    """Quadratic: starts slowly."""
    return t * t


def ease_out(t: float) -> float:
    """Quadratic: ends slowly."""
    return 1.0 - (1.0 - t) ** 2


def ease_in_out(t: float) -> float:
    """Piecewise quadratic: ease_in on the first half, ease_out on the second."""
    return 2.0 * t * t if t < 0.5 else 1.0 - 2.0 * (1.0 - t) ** 2


def smoothstep(t: float) -> float:
    """Cubic Hermite 3t² − 2t³: zero slope at both ends."""
    return t * t * (3.0 - 2.0 * t)


EASINGS: dict[str, Callable[[float], float]] = {
    "linear": linear, "ease_in": ease_in, "ease_out": ease_out, "ease_in_out": ease_in_out, "smoothstep": smoothstep,
}
