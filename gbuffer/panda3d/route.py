"""Seeded routes for recording the Panda3D scene: each seed is its own drive (start heading, a throttle and a
steering pattern of two slow sines), so held-out drives differ from the training ones as the kart's world seeds
do. Deterministic per physics tick: the same seed gives the same frames."""

from __future__ import annotations

import math

import numpy as np

from gbuffer.input import PlayerInput

SETTLE_S = 2.0      # the car is dropped at the start; a recording begins once it rests on the ground


class SeededRoute:
    """`control(tick)` → the PlayerInput of that physics tick; `heading_deg` is where the car starts facing."""

    def __init__(self, seed: int, tick_hz: int):
        rng = np.random.default_rng([seed, 0x9A7D])
        self.seed, self.tick_hz = int(seed), tick_hz
        self.heading_deg = float(rng.uniform(0.0, 360.0))
        self.throttle = float(rng.uniform(0.6, 0.9))
        self.periods_s = rng.uniform(4.0, 12.0, 2)             # slow enough that the chase camera keeps up
        self.amplitudes = rng.uniform(0.15, 0.4, 2)
        self.phases = rng.uniform(0.0, 2 * math.pi, 2)

    def control(self, tick: int) -> PlayerInput:
        t = tick / self.tick_hz
        steer = sum(a * math.sin(2 * math.pi * t / p + ph)
                    for a, p, ph in zip(self.amplitudes, self.periods_s, self.phases))
        return PlayerInput(steer=float(np.clip(steer, -1.0, 1.0)), throttle=self.throttle)
