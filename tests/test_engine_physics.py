"""Built-in engine without rendering: world generation, physics, autopilot, input hand-over."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from gbuffer.engine import EngineSimulation
from gbuffer.engine.physics import CHECKPOINT_SAMPLES, KART_RADIUS_M, TICK_HZ, KartPhysics
from gbuffer.engine.world import World
from gbuffer.input import PlayerInput


def drive(sim: EngineSimulation, inputs) -> list:
    states = []
    for control in inputs:
        sim.apply_input(control)
        sim.advance()
        states.append(sim.physics.state)
    return states


def scripted_inputs(ticks: int) -> list[PlayerInput]:
    return [PlayerInput(steer=math.sin(t / 40.0), throttle=0.8 if t % 200 < 150 else 0.0,
                        brake=0.5 if t % 200 >= 170 else 0.0) for t in range(ticks)]


def test_same_seed_and_inputs_give_identical_states():
    a = EngineSimulation(seed=3, autopilot=False)
    b = EngineSimulation(seed=3, autopilot=False)
    inputs = scripted_inputs(400)
    assert drive(a, inputs) == drive(b, inputs)
    assert np.array_equal(a.camera.eye, b.camera.eye)
    assert a.state() == b.state()


def test_different_seeds_give_different_worlds():
    w0, w1 = World.generate(0), World.generate(1)
    assert not np.allclose(w0.track.centre, w1.track.centre)
    assert [(o.x, o.z) for o in w0.obstacles] != [(o.x, o.z) for o in w1.obstacles]


def test_world_has_varied_scenery_clear_of_the_road():
    world = World.generate(5)
    kinds = {o.kind for o in world.obstacles}
    assert kinds == {"tree", "rock", "building"}
    assert {p.kind for p in world.pits} == {"water", "lava"}
    for o in world.obstacles:
        _, lateral = world.track.nearest(o.x, o.z)
        assert abs(lateral[0]) > world.track.half_width + o.radius
    # Hills: the road climbs and falls by a few metres.
    assert np.ptp(world.track.height) > 2.0


def test_steering_left_and_right_take_opposite_sides():
    ends = {}
    for steer in (-0.6, 0.6):
        sim = EngineSimulation(seed=0, autopilot=False)
        start = sim.physics.state
        s = drive(sim, [PlayerInput(steer=steer, throttle=1.0)] * TICK_HZ)[-1]
        # Lateral offset from the start pose: + is to the right of the start heading.
        dx, dz = s.x - start.x, s.z - start.z
        ends[steer] = -dx * math.sin(start.heading) + dz * math.cos(start.heading)
    assert ends[-0.6] < -2.0 and ends[0.6] > 2.0


def test_throttle_moves_and_brake_stops():
    sim = EngineSimulation(seed=0, autopilot=False)
    s = drive(sim, [PlayerInput(throttle=1.0)] * (2 * TICK_HZ))[-1]
    assert s.forward_speed > 10.0
    s = drive(sim, [PlayerInput(brake=1.0)] * TICK_HZ)[-1]
    assert s.forward_speed <= 0.5


def test_brake_held_at_a_standstill_reverses_but_the_handbrake_holds():
    sims = [EngineSimulation(seed=0, autopilot=False) for _ in range(2)]
    for sim in sims:
        drive(sim, [PlayerInput(throttle=1.0)] * (2 * TICK_HZ))
    reversing = drive(sims[0], [PlayerInput(brake=1.0)] * (4 * TICK_HZ))
    holding = drive(sims[1], [PlayerInput(brake=1.0, handbrake=True)] * (4 * TICK_HZ))
    assert reversing[-1].forward_speed < -3.0
    assert min(s.forward_speed for s in holding) > -1e-6  # never rolls backwards
    assert all(s.speed < 0.01 for s in holding[-TICK_HZ:])  # at rest for the whole last second


def _aim_at(physics: KartPhysics, x: float, z: float, distance: float) -> None:
    """Stand the kart `distance` metres from (x, z), facing it."""
    s = physics.state
    heading = math.atan2(z - s.z, x - s.x)
    kx, kz = x - math.cos(heading) * distance, z - math.sin(heading) * distance
    index = int(physics.world.track.nearest(kx, kz)[0][0])
    physics.state = replace(s, x=kx, z=kz, heading=heading, vx=0.0, vz=0.0, track_index=index)


def test_kart_stops_at_a_building():
    physics = KartPhysics(World.generate(2))
    b = next(o for o in physics.world.obstacles if o.kind == "building")
    _aim_at(physics, b.x, b.z, b.radius + 15.0)
    hit = False
    for _ in range(4 * TICK_HZ):
        s = physics.step(PlayerInput(throttle=1.0))
        hit |= s.collided
    # In the building's frame the kart's centre stays outside the box grown by the kart radius.
    c, sn = math.cos(b.yaw), math.sin(b.yaw)
    lx, lz = (s.x - b.x) * c + (s.z - b.z) * sn, -(s.x - b.x) * sn + (s.z - b.z) * c
    outside = max(abs(lx) - b.size[0] / 2, abs(lz) - b.size[1] / 2)
    assert hit
    assert KART_RADIUS_M - 0.05 <= outside <= KART_RADIUS_M + 1.0
    assert s.speed < 3.0


def test_kart_stops_at_a_tree():
    physics = KartPhysics(World.generate(2))
    tree = next(o for o in physics.world.obstacles if o.kind == "tree")
    _aim_at(physics, tree.x, tree.z, 12.0)
    closest = math.inf
    for _ in range(3 * TICK_HZ):
        s = physics.step(PlayerInput(throttle=1.0))
        closest = min(closest, math.hypot(s.x - tree.x, s.z - tree.z))
    assert tree.radius + KART_RADIUS_M - 0.05 <= closest <= tree.radius + KART_RADIUS_M + 0.5


def test_autopilot_completes_a_lap_on_the_road():
    sim = EngineSimulation(seed=4, autopilot=True)
    off_track = 0
    for tick in range(120 * TICK_HZ):  # noqa: B007 (read after the loop: the ticks the lap took)
        sim.advance()
        off_track += not sim.physics.state.on_track
        if sim.physics.lap >= 1:
            break
    assert sim.physics.lap == 1, f"no lap after {tick} ticks"
    assert off_track < 0.02 * tick
    assert sim.state()["lap"] == 1


def test_player_input_only_counts_when_autopilot_is_off():
    sim = EngineSimulation(seed=0, autopilot=False)
    drive(sim, [PlayerInput()] * TICK_HZ)
    assert sim.physics.state.speed == 0.0  # nobody presses anything: the kart waits
    sim.autopilot = True
    drive(sim, [PlayerInput(brake=1.0)] * TICK_HZ)  # the autopilot drives, player input is ignored
    assert sim.physics.state.forward_speed > 5.0
    sim.autopilot = False
    drive(sim, [PlayerInput(brake=1.0)] * TICK_HZ)  # hand-over: the player's brake takes effect
    assert sim.physics.state.forward_speed <= 0.5


def test_reset_returns_to_the_track_at_the_next_tick():
    sim = EngineSimulation(seed=0, autopilot=False)
    drive(sim, [PlayerInput(steer=0.3, throttle=1.0)] * (3 * TICK_HZ))  # steered off the road on purpose
    assert not sim.physics.state.on_track
    sim.apply_input(PlayerInput(reset=True))
    assert not sim.physics.state.on_track  # nothing happens before the tick
    sim.advance()
    s = sim.physics.state
    assert s.on_track and abs(s.lateral) < 0.5 and s.speed < 0.5
    assert sim.physics.state.tick == 3 * TICK_HZ + 1
    drive(sim, [PlayerInput()] * 5)
    assert sim.physics.state.on_track  # the reset is applied once, not on every tick


def test_reset_now_puts_the_kart_at_the_last_checkpoint():
    sim = EngineSimulation(seed=1, autopilot=True)
    for _ in range(10 * TICK_HZ):
        sim.advance()
    before = sim.physics.state
    sim.reset()
    s = sim.physics.state
    assert s.speed == 0.0 and s.lateral == 0.0
    assert s.track_index % CHECKPOINT_SAMPLES == 0 and 0 <= before.track_index - s.track_index < CHECKPOINT_SAMPLES
    assert s.travelled == before.travelled - (before.track_index - s.track_index)


def test_grass_is_slower_than_road():
    road = EngineSimulation(seed=0, autopilot=False)
    grass = EngineSimulation(seed=0, autopilot=False)
    s = grass.physics.state
    # Put the second kart on the grass beside the start line, facing the same way.
    rx, rz = -math.sin(s.heading), math.cos(s.heading)
    grass.physics.state = replace(s, x=s.x + rx * 11.0, z=s.z + rz * 11.0)
    a = drive(road, [PlayerInput(throttle=1.0)] * (2 * TICK_HZ))[-1]
    b = drive(grass, [PlayerInput(throttle=1.0)] * (2 * TICK_HZ))[-1]
    assert b.surface == "grass" and a.surface == "road"
    assert b.forward_speed < 0.8 * a.forward_speed


def test_autopilot_frees_a_kart_stuck_against_a_building():
    sim = EngineSimulation(seed=2, autopilot=False)
    b = next(o for o in sim.world.obstacles if o.kind == "building")
    _aim_at(sim.physics, b.x, b.z, b.radius + 3.0)
    hits = sum(s.collided for s in drive(sim, [PlayerInput(throttle=1.0)] * (2 * TICK_HZ)))
    assert hits > 0
    sim.autopilot = True
    for _ in range(8 * TICK_HZ):
        sim.advance()
    s = sim.physics.state
    assert s.on_track and s.forward_speed > 5.0


def test_world_mesh_faces_wind_around_their_normals_and_sectors_cover_it():
    from gbuffer.engine.meshes import FLOATS_PER_VERTEX, build_kart_mesh, build_world_mesh

    vertices, sectors = build_world_mesh(World.generate(0))
    for mesh in (vertices, build_kart_mesh()):
        t = mesh.reshape(-1, 3, FLOATS_PER_VERTEX).astype(np.float64)
        geometric = np.cross(t[:, 1, :3] - t[:, 0, :3], t[:, 2, :3] - t[:, 0, :3])
        assert ((geometric * t[:, :, 3:6].mean(axis=1)).sum(axis=1) >= 0).all()  # back faces can be culled
    assert sum(s.count for s in sectors) == len(vertices)
    assert [s.first for s in sectors] == list(np.cumsum([0] + [s.count for s in sectors[:-1]]))
    assert 8_000 < len(vertices) // 3 < 16_000  # modest enough for llvmpipe


def test_lava_sends_the_kart_back_to_the_track_and_water_slows_it():
    physics = KartPhysics(World.generate(0))
    lava = next(p for p in physics.world.pits if p.kind == "lava")
    _aim_at(physics, lava.x, lava.z, 0.0)
    s = physics.step(PlayerInput(throttle=1.0))
    assert s.surface == "lava" and s.on_track and s.speed == 0.0

    water = next(p for p in physics.world.pits if p.kind == "water")
    _aim_at(physics, water.x, water.z, water.radius - 0.5)  # on the shore, facing across the pool
    physics.state = replace(physics.state, vx=10.0 * math.cos(physics.state.heading),
                            vz=10.0 * math.sin(physics.state.heading))
    speeds = [physics.step(PlayerInput()).speed for _ in range(TICK_HZ // 2)]
    assert physics.state.surface == "water" and speeds[-1] < 4.0


def test_the_state_reports_the_control_its_last_tick_was_driven_with():
    """What a driver's key press changes first: the frame's `control` (latency benchmarks look for it)."""
    sim = EngineSimulation(seed=2, autopilot=True)
    sim.advance()
    assert sim.state()["control"]["throttle"] > 0                 # the autopilot drives
    sim.autopilot = False
    sim.apply_input(PlayerInput(steer=-1.0, throttle=0.5))
    assert sim.state()["control"]["steer"] != -1.0 or sim.state()["control"]["throttle"] != 0.5   # not yet ticked
    sim.advance()
    assert sim.state()["control"] == {"steer": -1.0, "throttle": 0.5, "brake": 0.0}
