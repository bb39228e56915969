"""Kart physics on a fixed 60 Hz tick: arcade driving, ground following, collisions, laps and resets.

Pure Python floats and numpy, no clocks and no randomness, so a seed plus an input sequence always gives
bit-identical states. Heading θ: forward is (cos θ, sin θ) in x/z, so steering right increases θ.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from gbuffer.engine.track import HALF_WIDTH_M, KERB_WIDTH_M
from gbuffer.engine.world import World
from gbuffer.input import PlayerInput

TICK_HZ = 60
DT = 1.0 / TICK_HZ

KART_RADIUS_M = 1.0
WHEELBASE_M = 1.6
MAX_STEER_RAD = 0.55
ACCEL = 11.0             # m/s² at full throttle
BRAKE_DECEL = 22.0       # m/s² at full brake
REVERSE_ACCEL = 5.0
MAX_REVERSE = 6.0        # m/s
TOP_SPEED = 28.0         # m/s on the road (~100 km/h)
DRAG = 0.012             # 1/m, quadratic air drag
ROLLING_ROAD = 0.15      # 1/s
ROLLING_GRASS = 1.2      # 1/s: leaving the road costs speed
GRIP_ROAD = 12.0         # 1/s: how fast sideways sliding dies out
GRIP_GRASS = 5.0
WATER_DRAG = 2.5         # 1/s extra in a water pit
GRAVITY = 9.81
BARRIER_M = 28.0         # soft wall: lateral distance from the centre line where a spring pushes back
BARRIER_STIFFNESS = 6.0  # 1/s² per metre beyond the barrier
BOUNCE = 0.3             # fraction of the impact speed returned by an obstacle
HOLD_SPEED = 0.3         # m/s: below this, with no pedal pressed, static friction holds the kart...
HOLD_ACCEL = 2.5         # m/s²: ...unless the slope pulls harder than this
CHECKPOINT_SAMPLES = 32  # a reset returns the kart to the last multiple of this many centre samples


@dataclass(frozen=True)
class KartState:
    """Everything that evolves per tick. Position in metres, velocity in m/s (world x/z), heading in radians.

    `track_index` is the nearest centre sample; `travelled` counts centre samples driven forward since the
    start (backwards subtracts), so `lap` = completed laps. `pitch`/`roll` (radians) tilt the kart to the ground.
    """

    x: float
    z: float
    y: float
    heading: float
    vx: float = 0.0
    vz: float = 0.0
    track_index: int = 0
    travelled: int = 0
    lateral: float = 0.0
    pitch: float = 0.0
    roll: float = 0.0
    tick: int = 0
    surface: str = "road"  # road | grass | water | lava
    collided: bool = False

    @property
    def speed(self) -> float:
        return math.hypot(self.vx, self.vz)

    @property
    def forward_speed(self) -> float:
        return self.vx * math.cos(self.heading) + self.vz * math.sin(self.heading)

    @property
    def on_track(self) -> bool:
        return abs(self.lateral) <= HALF_WIDTH_M + KERB_WIDTH_M


class KartPhysics:
    """Steps one kart through a World. `state` is replaced (immutable) each tick."""

    def __init__(self, world: World, start_index: int = 0):
        self.world = world
        track = world.track
        # Obstacles as arrays for a vectorised broad phase.
        self._circles = [o for o in world.obstacles if o.kind != "building"]
        self._boxes = [o for o in world.obstacles if o.kind == "building"]
        self._cx = np.array([o.x for o in self._circles])
        self._cz = np.array([o.z for o in self._circles])
        self._cr = np.array([o.radius for o in self._circles])
        self.state = self._placed_at(start_index, tick=0, travelled=0)
        self._samples = track.samples

    def _placed_at(self, index: int, tick: int, travelled: int) -> KartState:
        t = self.world.track
        index %= t.samples
        x, z = (float(v) for v in t.centre[index])
        heading = math.atan2(float(t.tangent[index, 1]), float(t.tangent[index, 0]))
        y = float(self.world.ground_height(x, z, index))
        return KartState(x, z, y, heading, track_index=index, travelled=travelled, tick=tick)

    def reset(self) -> None:
        """Back to the last checkpoint passed, standing still, facing along the track."""
        s = self.state
        index = (s.track_index // CHECKPOINT_SAMPLES) * CHECKPOINT_SAMPLES
        travelled = s.travelled - self._wrapped(s.track_index - index)
        self.state = self._placed_at(index, s.tick, travelled)

    def _wrapped(self, delta: int) -> int:
        """Index difference wrapped into [-S/2, S/2)."""
        half = self._samples // 2
        return (delta + half) % self._samples - half

    def step(self, control: PlayerInput) -> KartState:
        """Advance one tick of DT seconds under `control` (already the chosen input for this tick)."""
        c = control.clamped()
        if c.reset:
            self.reset()
        s = self.state
        world = self.world
        fx, fz = math.cos(s.heading), math.sin(s.heading)
        rx, rz = -fz, fx
        v_f = s.vx * fx + s.vz * fz
        v_r = s.vx * rx + s.vz * rz

        pit = world.pit_at(s.x, s.z)
        surface = pit.kind if pit else ("road" if s.on_track else "grass")
        if surface == "lava":
            self.reset()
            self.state = replace(self.state, tick=s.tick + 1, surface="lava")
            return self.state

        # Longitudinal: engine, brakes, drag, rolling resistance, slope.
        a = c.throttle * ACCEL * max(0.0, 1.0 - max(v_f, 0.0) / TOP_SPEED * 0.35)
        if c.brake > 0 and (v_f > 0.5 or c.handbrake):
            a -= c.brake * BRAKE_DECEL * math.copysign(1.0, v_f) * (v_f != 0)  # against the motion
        elif c.brake > 0:
            a -= c.brake * REVERSE_ACCEL * (v_f > -MAX_REVERSE)
        rolling = ROLLING_ROAD if surface == "road" else ROLLING_GRASS
        a -= DRAG * v_f * abs(v_f) + rolling * v_f
        if surface == "water":
            a -= WATER_DRAG * v_f
        h_ahead = float(world.ground_height(s.x + fx, s.z + fz, s.track_index))
        h_behind = float(world.ground_height(s.x - fx, s.z - fz, s.track_index))
        slope = (h_ahead - h_behind) / 2.0
        downhill = GRAVITY * slope / math.sqrt(1.0 + slope * slope)
        a -= downhill
        v_f_new = v_f + a * DT
        if c.throttle == 0 and v_f * v_f_new < 0:  # drag alone never reverses the kart
            v_f_new = 0.0
        if c.throttle == 0 and c.brake == 0 and abs(v_f_new) < HOLD_SPEED and abs(downhill) < HOLD_ACCEL:
            v_f_new = 0.0  # static friction: a kart left alone on a gentle slope stays put
        if c.throttle == 0 and c.brake > 0 and c.handbrake and abs(v_f_new) < HOLD_SPEED:
            v_f_new = 0.0  # the handbrake holds the kart, even on a slope
        v_f = v_f_new

        grip = GRIP_ROAD if surface == "road" else GRIP_GRASS
        v_r *= math.exp(-grip * DT)

        # Steering: bicycle model, less lock at speed so the kart stays controllable.
        steer = c.steer * MAX_STEER_RAD / (1.0 + abs(v_f) / 18.0)
        heading = s.heading + v_f * math.tan(steer) / WHEELBASE_M * DT
        fx, fz = math.cos(heading), math.sin(heading)
        rx, rz = -fz, fx
        vx, vz = v_f * fx + v_r * rx, v_f * fz + v_r * rz

        x, z = s.x + vx * DT, s.z + vz * DT
        x, z, vx, vz, collided = self._collide(x, z, vx, vz)

        index = world.track.nearest_near(s.track_index, x, z)
        lateral = float(world.track.lateral(index, x, z))
        if abs(lateral) > BARRIER_M:  # soft wall: a spring back towards the road, plus damping
            t = world.track.tangent[index]
            push = -math.copysign(BARRIER_STIFFNESS * (abs(lateral) - BARRIER_M), lateral) * DT
            vx += push * -float(t[1])
            vz += push * float(t[0])
            vx *= 0.98
            vz *= 0.98
        x0, z0, x1, z1 = world.bounds
        x, z = min(max(x, x0 + 2), x1 - 2), min(max(z, z0 + 2), z1 - 2)

        y = float(world.ground_height(x, z, index))
        pitch = math.atan(slope)
        h_right = float(world.ground_height(x + rx, z + rz, index))
        h_left = float(world.ground_height(x - rx, z - rz, index))
        roll = math.atan((h_right - h_left) / 2.0)

        self.state = KartState(x, z, y, heading, vx, vz, index,
                               s.travelled + self._wrapped(index - s.track_index), lateral,
                               pitch, roll, s.tick + 1, surface, collided)
        return self.state

    def _collide(self, x: float, z: float, vx: float, vz: float):
        """Push the kart (a circle) out of trees, rocks (circles) and buildings (rotated boxes) and take away
        the velocity into the obstacle, keeping a little bounce."""
        collided = False

        def bounce(nx: float, nz: float, vx: float, vz: float):
            vn = vx * nx + vz * nz
            if vn < 0:
                vx -= (1 + BOUNCE) * vn * nx
                vz -= (1 + BOUNCE) * vn * nz
            return vx, vz

        if len(self._cx):
            dist = np.hypot(self._cx - x, self._cz - z)
            for i in np.nonzero(dist < self._cr + KART_RADIUS_M)[0]:
                d = float(dist[i])
                nx, nz = ((x - self._cx[i]) / d, (z - self._cz[i]) / d) if d > 1e-9 else (1.0, 0.0)
                depth = float(self._cr[i]) + KART_RADIUS_M - d
                x, z = x + nx * depth, z + nz * depth
                vx, vz = bounce(nx, nz, vx, vz)
                collided = True

        for b in self._boxes:
            if abs(b.x - x) > b.radius + KART_RADIUS_M or abs(b.z - z) > b.radius + KART_RADIUS_M:
                continue
            cos, sin = math.cos(b.yaw), math.sin(b.yaw)
            lx = (x - b.x) * cos + (z - b.z) * sin   # along the box's width axis
            lz = -(x - b.x) * sin + (z - b.z) * cos  # along its depth axis
            hw, hd = b.size[0] / 2, b.size[1] / 2
            px, pz = min(max(lx, -hw), hw), min(max(lz, -hd), hd)
            dx, dz = lx - px, lz - pz
            d = math.hypot(dx, dz)
            if d >= KART_RADIUS_M:
                continue
            if d > 1e-9:
                nlx, nlz, depth = dx / d, dz / d, KART_RADIUS_M - d
            else:  # centre inside the box: leave through the nearest face
                gaps = (hw - lx, hw + lx, hd - lz, hd + lz)
                k = int(np.argmin(gaps))
                nlx, nlz = ((1, 0), (-1, 0), (0, 1), (0, -1))[k]
                depth = gaps[k] + KART_RADIUS_M
            nx, nz = nlx * cos - nlz * sin, nlx * sin + nlz * cos
            x, z = x + nx * depth, z + nz * depth
            vx, vz = bounce(nx, nz, vx, vz)
            collided = True
        return x, z, vx, vz, collided

    @property
    def lap(self) -> int:
        return max(0, self.state.travelled // self._samples)

    @property
    def progress(self) -> float:
        """Fraction of the current lap driven, 0..1."""
        return (self.state.travelled % self._samples) / self._samples
