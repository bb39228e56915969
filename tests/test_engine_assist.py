"""The verge assist (issue 28, finding 11): a player who only holds the throttle stays on the road at speed,
and a player who steers is never overruled. Headless simulation: deterministic, no GL."""

from __future__ import annotations

import pytest

from gbuffer.engine import EngineSimulation
from gbuffer.engine.physics import TICK_HZ
from gbuffer.input import PlayerInput


def hold(sim: EngineSimulation, control: PlayerInput, ticks: int) -> list:
    sim.apply_input(control)
    states = []
    for _ in range(ticks):
        sim.advance()
        states.append(sim.physics.state)
    return states


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_holding_only_the_throttle_keeps_the_kart_on_the_road_at_speed(seed):
    sim = EngineSimulation(seed=seed, autopilot=False)
    states = hold(sim, PlayerInput(throttle=1.0), 30 * TICK_HZ)      # 30 s: several bends of the track
    assert all(s.on_track for s in states), f"off the road at tick {next(s.tick for s in states if not s.on_track)}"
    cruising = [s.speed for s in states[5 * TICK_HZ:]]                # after the first 5 s of acceleration
    assert min(cruising) > 17.0, min(cruising)                       # not the 6.8 m/s of the grass
    assert states[-1].travelled > 0.8 * sim.world.track.samples     # round most of a lap, bends and all


def test_the_assist_never_overrules_a_steering_player():
    sim = EngineSimulation(seed=0, autopilot=False)
    steered = hold(sim, PlayerInput(steer=0.3, throttle=1.0), 3 * TICK_HZ)
    assert not steered[-1].on_track                                    # steered off the road on purpose
    assert sim.state()["control"]["steer"] == 0.3
    grass = hold(sim, PlayerInput(throttle=1.0), 10)                   # hands off on the grass: no pull back
    assert all(not s.on_track for s in grass) and sim.state()["control"]["steer"] == 0.0


def test_the_assist_is_deterministic():
    runs = [hold(EngineSimulation(seed=3, autopilot=False), PlayerInput(throttle=1.0), 10 * TICK_HZ)
            for _ in range(2)]
    assert runs[0] == runs[1]
