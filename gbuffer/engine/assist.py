"""Verge assist: a light hand on the wheel for a player who only presses the throttle.

A visitor who holds Up and nothing else drives straight on while the road bends away, lands on the grass and
sees the speed fall from ~20 to ~7 m/s, which reads as a broken accelerator. The assist steers only when the
player is not steering, the kart is on the road moving forward, and where it will be PREVIEW_S from now
lies in the outer band of the road; it steers back towards the centre line, at most ASSIST_MAX_STEER of the
lock. A player who steers (or drives off on purpose and is already on the grass) is never overruled.
"""

from __future__ import annotations

from dataclasses import replace

from gbuffer.engine.autopilot import pursuit_steer
from gbuffer.engine.physics import KartState
from gbuffer.engine.track import HALF_WIDTH_M, Track
from gbuffer.input import PlayerInput

PREVIEW_S = 0.6          # s: how far ahead the assist looks at where the kart is heading
BAND_FROM_M = 3.0        # m from the centre line: no help inside this...
BAND_FULL_M = HALF_WIDTH_M  # ...full help (ASSIST_MAX_STEER) from the road's edge on
ASSIST_MAX_STEER = 0.5   # fraction of full lock the assist may use: light, a player's steer is full
MIN_SPEED = 2.0          # m/s: parking and reversing get no help
LOOKAHEAD_M = 10.0       # base distance of the point on the centre line the assist steers to...
LOOKAHEAD_PER_MS = 0.6   # ...plus this many metres per m/s of speed


def verge_assist(track: Track, s: KartState, control: PlayerInput) -> PlayerInput:
    """`control` with the assist's steer added when the player is not steering and heads for the verge."""
    v = s.forward_speed
    if control.steer != 0.0 or v < MIN_SPEED or not s.on_track:
        return control
    # Where the kart is in PREVIEW_S, going straight on, measured across the road at that point.
    px, pz = s.x + s.vx * PREVIEW_S, s.z + s.vz * PREVIEW_S
    window = 8 + round(v * PREVIEW_S / track.spacing)
    ahead = track.nearest_near(s.track_index, px, pz, window)
    drift = abs(float(track.lateral(ahead, px, pz)))
    weight = min(1.0, max(0.0, (drift - BAND_FROM_M) / (BAND_FULL_M - BAND_FROM_M)))
    if weight == 0.0:
        return control
    steer = pursuit_steer(track, s, LOOKAHEAD_M + LOOKAHEAD_PER_MS * v)
    limit = weight * ASSIST_MAX_STEER
    return replace(control, steer=min(limit, max(-limit, steer)))
