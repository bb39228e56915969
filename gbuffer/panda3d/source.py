"""Panda3DSource: the Panda3D driving scene as a live G-buffer source with paired RGB (its own lit frame)."""

from __future__ import annotations

import threading
from dataclasses import replace
from typing import Any, Iterator

from gbuffer.engine.source import check_engine_options
from gbuffer.frame import GBufferFrame
from gbuffer.input import PlayerInput
from gbuffer.source import LiveSource
from gbuffer.viewpoint import CAMERA_KEY, Viewpoint

# With nobody driving, the car cruises in a wide circle so a stream shows motion (like the kart's autopilot).
CRUISE = PlayerInput(steer=0.25, throttle=0.35)


class Panda3DSource(LiveSource):
    """Unbounded frames of the Panda3D scene. Physics ticks at 60 Hz; each frame advances the ticks that fall
    inside it. Every frame carries `rgb`, the engine's lit frame drawn in the same pass as the G-buffer, and `sun`,
    where its sun's shadow map lets the sun reach (frame.sun).

    `cruise`: drive the circle until the first `apply_input` (a driver takes over for good).
    `seed`: drive that seed's route instead (gbuffer/panda3d/route.py), for recordings; inputs are then ignored.
    `frame.meta["camera"]` is the camera of each frame (gbuffer/viewpoint.py)."""

    def __init__(self, width: int = 416, height: int = 224, fps: float = 30, cruise: bool = True,
                 seed: int | None = None):
        from gbuffer.panda3d.gbuffer_pass import FOV_Y_DEG, GBufferPass
        from gbuffer.panda3d.route import SETTLE_S, SeededRoute
        from gbuffer.panda3d.scene import TICK_HZ, DrivingScene

        self.width, self.height, self.fps, seed_checked = check_engine_options(width, height, fps,
                                                                               0 if seed is None else seed)
        self.name = "panda3d" if seed is None else f"panda3d seed={seed_checked}"
        self.tick_hz, self.fov_y_deg = TICK_HZ, FOV_Y_DEG
        self.cruise = bool(cruise)
        self.route = None if seed is None else SeededRoute(seed_checked, TICK_HZ)
        self.scene = DrivingScene()
        if self.route is not None:
            self.scene.start_heading_deg = self.route.heading_deg
            self.scene.reset()
            for _ in range(int(SETTLE_S * TICK_HZ)):        # not counted in `ticks`: the route starts after
                self.scene.step(PlayerInput())
        self.gbuffer = GBufferPass(self.scene.root, self.width, self.height)
        self.scene.attach_camera(self.gbuffer.camera)
        self.frame_index = 0
        self.ticks = 0
        self._input = PlayerInput()
        self._reset_pending = False
        self._lock = threading.Lock()

    def apply_input(self, player_input: PlayerInput) -> None:
        """Thread-safe; takes effect at the next tick. A reset is applied once."""
        p = player_input.clamped()
        with self._lock:
            self.cruise = False
            self._reset_pending = self._reset_pending or p.reset
            self._input = replace(p, reset=False)

    def _control(self) -> PlayerInput:
        if self.route is not None:
            return self.route.control(self.ticks)
        with self._lock:
            control = CRUISE if self.cruise else self._input
            if self._reset_pending:
                control, self._reset_pending = replace(control, reset=True), False
            return control

    def advance(self) -> None:
        """The physics ticks of the next frame, and the camera after them."""
        due = int((self.frame_index + 1) * self.tick_hz // self.fps)
        while self.ticks < due:
            self.scene.step(self._control())
            self.ticks += 1
        self.scene.follow()
        self.frame_index += 1

    def next_frame(self) -> GBufferFrame:
        i = self.frame_index
        self.advance()
        self.gbuffer.draw()
        data, rgb = self.gbuffer.read()
        sun = self.gbuffer.sun_mask()
        view, projection = self.scene.view_projection(self.fov_y_deg, self.width / self.height)
        meta = {**self.state(), CAMERA_KEY: Viewpoint(view, projection).to_meta()}
        return GBufferFrame(i, i / self.fps, data, meta, rgb, sun)

    def state(self) -> dict[str, Any]:
        route = {} if self.route is None else {"route_seed": self.route.seed}
        return {**self.scene.state(), "tick": self.ticks, "cruise": self.cruise, "engine": "panda3d", **route}

    def __iter__(self) -> Iterator[GBufferFrame]:
        while True:
            yield self.next_frame()

    def close(self) -> None:
        self.gbuffer.close()
