"""EngineSource: the built-in kart game as a live G-buffer source."""

from __future__ import annotations

import operator
import threading
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Iterator

from alaya_errors import UserError
from gbuffer.engine.assist import verge_assist
from gbuffer.engine.autopilot import Autopilot
from gbuffer.engine.camera import ChaseCamera
from gbuffer.engine.physics import TICK_HZ, KartPhysics
from gbuffer.engine.world import World, shared_world
from gbuffer.frame import GBufferFrame
from gbuffer.input import PlayerInput
from gbuffer.source import LiveSource
from gbuffer.viewpoint import CAMERA_KEY, Viewpoint

if TYPE_CHECKING:     # GL only when rendering
    from gbuffer.engine.raster import GBufferRaster

MAX_SIZE = 4096
TELEPORT_M = 5.0  # a kart moving further than this in one tick was put back on the track
STALLED_TICKS = 4 * TICK_HZ  # an autopilot kart that makes no progress along the track this long is reset


class EngineError(UserError):
    """A bad engine option (size, fps, seed)."""


class EngineSimulation:
    """World + kart + autopilot + chase camera, with no rendering: runs headless and fast.

    `advance()` runs one physics tick with the control of the moment: the autopilot's when `autopilot` is
    on, otherwise the last player input, with the verge assist (assist.py) while the player is not steering.
    A `reset` in the player input is applied once, at the next tick.
    """

    def __init__(self, seed: int = 0, autopilot: bool = True):
        self.seed = int(seed)
        self.world = shared_world(self.seed)
        self.physics = KartPhysics(self.world)
        self.pilot = Autopilot(self.world.track)
        self.camera = ChaseCamera(self.world.ground_height)
        self.camera.snap(self.physics.state)
        self.autopilot = bool(autopilot)
        self.player_input = PlayerInput()
        self.control = PlayerInput()    # what the last tick was driven with (the autopilot's or the player's)
        self._reset_pending = False
        self._input_lock = threading.Lock()
        self._best_travelled = 0    # furthest point reached along the track (centre samples)...
        self._stalled_ticks = 0     # ...and how many ticks the autopilot has not gone beyond it

    def apply_input(self, player_input: PlayerInput) -> None:
        """Thread-safe: a server may call this while a worker thread advances the simulation."""
        p = player_input.clamped()
        with self._input_lock:
            self._reset_pending = self._reset_pending or p.reset
            self.player_input = replace(p, reset=False)

    def advance(self) -> None:
        with self._input_lock:
            player, reset = self.player_input, self._reset_pending
            self._reset_pending = False
        state = self.physics.state
        control = self.pilot.control(state) if self.autopilot else verge_assist(self.world.track, state, player)
        if reset:
            control = replace(control, reset=True)
        self.control = control
        before = self.physics.state
        state = self.physics.step(control)
        if not self.autopilot or state.travelled > self._best_travelled:
            self._best_travelled, self._stalled_ticks = state.travelled, 0
        else:
            self._stalled_ticks += 1
        if self._stalled_ticks >= STALLED_TICKS:  # the autopilot cannot get on (against a wall): restart
            self.physics.reset()
            state = self.physics.state
            self._best_travelled, self._stalled_ticks = state.travelled, 0
        if abs(state.x - before.x) + abs(state.z - before.z) > TELEPORT_M:
            self.camera.snap(state)  # reset or lava: cut to the new place instead of swooping across the map
        else:
            self.camera.follow(state)

    def reset(self) -> None:
        """Back to the last checkpoint now (not waiting for a tick)."""
        self.physics.reset()
        self.camera.snap(self.physics.state)
        self._best_travelled, self._stalled_ticks = self.physics.state.travelled, 0

    def state(self) -> dict[str, Any]:
        """Kart state as plain JSON-able values (what `frame.meta` carries)."""
        s = self.physics.state
        return {
            "position": [round(s.x, 4), round(s.y, 4), round(s.z, 4)],
            "heading": round(s.heading, 5),
            "speed": round(s.speed, 4),
            "lap": self.physics.lap,
            "lap_progress": round(self.physics.progress, 5),
            "on_track": s.on_track,
            "surface": s.surface,
            "collided": s.collided,
            "tick": s.tick,
            "autopilot": self.autopilot,
            "seed": self.seed,
            # the control of the frame's last tick: how a driver (or a latency benchmark) sees an input land
            "control": {"steer": round(self.control.steer, 3), "throttle": round(self.control.throttle, 3),
                        "brake": round(self.control.brake, 3)},
        }


def check_engine_options(width, height, fps, seed=0) -> tuple[int, int, float, int]:
    """Validated (width, height, fps, seed): sizes 1..4096 pixels, fps above 0 and at most the physics rate,
    seed a whole number >= 0."""
    try:
        w, h, f = operator.index(width), operator.index(height), float(fps)
    except (TypeError, ValueError):
        raise EngineError(f"size {width!r}x{height!r} at {fps!r} fps: expected whole pixel counts and a number",
                          "engine") from None
    try:
        seed = operator.index(seed)
    except TypeError:
        seed = -1
    if seed < 0:
        raise EngineError("seed must be a whole number >= 0", "engine")
    if not (0 < w <= MAX_SIZE and 0 < h <= MAX_SIZE):
        raise EngineError(f"size {w}x{h} is not possible; width and height must be 1..{MAX_SIZE}", "engine")
    if not 0 < f <= TICK_HZ:
        raise EngineError(f"fps {f:g} is not possible; it must be above 0 and at most {TICK_HZ}", "engine")
    return w, h, f, seed


class EngineSource(LiveSource):
    """The built-in kart engine as an unbounded live source of G-buffer frames.

    Physics runs at 60 Hz; each frame at `fps` advances the ticks that fall inside it (integer arithmetic,
    so 24 or 30 fps are both exact and deterministic). `frame.meta` holds the kart state after those ticks.
    The GL context is created on the first frame and released by `close()`. With `rgb=True` each frame also
    carries the engine's beauty pass (`frame.rgb`, gbuffer/engine/beauty.py) and its sun visibility (`frame.sun`):
    paired data for training. `frame.meta["camera"]` is the camera it was drawn from (gbuffer/viewpoint.py).
    """

    name = "engine"

    def __init__(self, width: int = 832, height: int = 448, fps: float = 30, seed: int = 0,
                 autopilot: bool = True, rgb: bool = False):
        self.width, self.height, self.fps, seed = check_engine_options(width, height, fps, seed)
        self.name = f"engine seed={seed}"
        self.rgb = bool(rgb)
        self.sim = EngineSimulation(seed, autopilot)
        self.frame_index = 0
        self._raster: GBufferRaster | None = None

    @classmethod
    def demo(cls, width: int = 832, height: int = 448, fps: float = 30, seed: int = 0,
             rgb: bool = False) -> "EngineSource":
        """Autopilot laps, for recordings and the studio's default stream."""
        return cls(width, height, fps, seed, autopilot=True, rgb=rgb)

    @property
    def autopilot(self) -> bool:
        return self.sim.autopilot

    @autopilot.setter
    def autopilot(self, on: bool) -> None:
        self.sim.autopilot = bool(on)

    @property
    def world(self) -> World:
        return self.sim.world

    def apply_input(self, player_input: PlayerInput) -> None:
        self.sim.apply_input(player_input)

    def state(self) -> dict[str, Any]:
        return self.sim.state()

    def reset(self) -> None:
        self.sim.reset()

    def _ticks_before(self, frame_index: int) -> int:
        return int(frame_index * TICK_HZ // self.fps)

    def next_frame(self) -> GBufferFrame:
        """Advance the world by one frame's worth of ticks and render it."""
        from gbuffer.engine.raster import GBufferRaster, kart_model_matrix  # GL only when rendering

        i = self.frame_index
        for _ in range(self._ticks_before(i + 1) - self._ticks_before(i)):
            self.sim.advance()
        if self._raster is None:
            self._raster = GBufferRaster(self.sim.world, self.width, self.height, beauty=self.rgb)
        s = self.sim.physics.state
        view, kart = self.sim.camera.view_matrix(), kart_model_matrix(s.x, s.y, s.z, s.heading, s.pitch, s.roll)
        if self.rgb:
            data, rgb, sun = self._raster.render_lit(view, kart)
        else:
            data, rgb, sun = self._raster.render(view, kart), None, None
        self.frame_index += 1
        meta = {**self.state(), CAMERA_KEY: Viewpoint(view, self._raster.projection).to_meta()}
        return GBufferFrame(i, i / self.fps, data, meta, rgb, sun)

    def __iter__(self) -> Iterator[GBufferFrame]:
        while True:
            yield self.next_frame()

    def close(self) -> None:
        if self._raster is not None:
            self._raster.close()
            self._raster = None
