"""Demo driver: pure pursuit on the track centre line, slowing down for the curves ahead."""

from __future__ import annotations

import math

from gbuffer.engine.physics import MAX_STEER_RAD, WHEELBASE_M, KartState
from gbuffer.engine.track import Track
from gbuffer.input import PlayerInput

LATERAL_ACCEL = 9.0     # m/s² the autopilot allows in a curve
CRUISE_SPEED = 22.0     # m/s on straights
MIN_LOOKAHEAD_M = 6.0


def pursuit_steer(t: Track, s: KartState, lookahead_m: float) -> float:
    """The steer (-1..1 before clamping) that brings the kart onto the centre line `lookahead_m` ahead."""
    v = max(s.forward_speed, 0.0)
    ahead = (s.track_index + max(1, round(lookahead_m / t.spacing))) % t.samples
    tx, tz = (float(c) for c in t.centre[ahead])
    # Target in the kart frame: forward (cos θ, sin θ), right (-sin θ, cos θ).
    dx, dz = tx - s.x, tz - s.z
    fwd = dx * math.cos(s.heading) + dz * math.sin(s.heading)
    right = -dx * math.sin(s.heading) + dz * math.cos(s.heading)
    alpha = math.atan2(right, fwd)
    distance = max(math.hypot(dx, dz), 1e-3)
    wheel = math.atan(2.0 * WHEELBASE_M * math.sin(alpha) / distance)
    # The physics reduces lock at speed; ask for proportionally more so the turn radius is right.
    return wheel / MAX_STEER_RAD * (1.0 + v / 18.0)


class Autopilot:
    """`control(state)` → the PlayerInput a steady driver would give this tick. Stateless and deterministic."""

    def __init__(self, track: Track, cruise_speed: float = CRUISE_SPEED):
        self.track = track
        self.cruise_speed = cruise_speed

    def control(self, s: KartState) -> PlayerInput:
        t = self.track
        v = max(s.forward_speed, 0.0)
        steer = pursuit_steer(t, s, MIN_LOOKAHEAD_M + 0.6 * v)

        curvature = t.max_curvature_ahead(s.track_index, 15.0 + 1.2 * v)
        target = min(self.cruise_speed, math.sqrt(LATERAL_ACCEL / max(curvature, 1e-4)))
        error = target - v
        throttle = min(1.0, max(0.0, 0.35 * error + 0.3))
        brake = min(1.0, max(0.0, -0.25 * error)) if error < -1.0 else 0.0
        if brake:
            throttle = 0.0
        return PlayerInput(steer, throttle, brake).clamped()
