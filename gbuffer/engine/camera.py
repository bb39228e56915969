"""Chase camera: follows behind and above the kart, smoothed per physics tick (so it is deterministic)."""

from __future__ import annotations

import math

import numpy as np

from gbuffer.engine.physics import DT, KartState

BEHIND_M = 5.5
ABOVE_M = 2.3
LOOK_AHEAD_M = 4.0
LOOK_ABOVE_M = 1.0
FOLLOW_RATE = 5.0   # 1/s; higher = stiffer
CLEARANCE_M = 1.0   # never below the ground by less than this


class ChaseCamera:
    """`eye` and `target` (world x, y, z) in metres; `view_matrix()` is a 4x4 float32 look-at (column vectors)."""

    def __init__(self, ground_height):
        self.ground_height = ground_height  # (x, z) → height in metres
        self.eye = np.zeros(3)
        self.target = np.zeros(3)

    def _wanted(self, s: KartState) -> tuple[np.ndarray, np.ndarray]:
        fx, fz = math.cos(s.heading), math.sin(s.heading)
        eye = np.array([s.x - fx * BEHIND_M, s.y + ABOVE_M, s.z - fz * BEHIND_M])
        target = np.array([s.x + fx * LOOK_AHEAD_M, s.y + LOOK_ABOVE_M, s.z + fz * LOOK_AHEAD_M])
        return eye, target

    def snap(self, s: KartState) -> None:
        """Jump straight to the resting position (start, reset)."""
        self.eye, self.target = self._wanted(s)
        self._clear_ground()

    def follow(self, s: KartState) -> None:
        """One tick of exponential smoothing towards the resting position."""
        eye, target = self._wanted(s)
        k = 1.0 - math.exp(-FOLLOW_RATE * DT)
        self.eye = self.eye + (eye - self.eye) * k
        self.target = self.target + (target - self.target) * min(1.0, 2 * k)
        self._clear_ground()

    def _clear_ground(self) -> None:
        floor = float(self.ground_height(self.eye[0], self.eye[2])) + CLEARANCE_M
        if self.eye[1] < floor:
            self.eye = np.array([self.eye[0], floor, self.eye[2]])

    def view_matrix(self) -> np.ndarray:
        return look_at(self.eye, self.target)


def look_at(eye, target) -> np.ndarray:
    """World → camera 4x4 float32 (column vectors): camera at `eye` looking at `target`, y up."""
    eye = np.asarray(eye, np.float64)
    f = np.asarray(target, np.float64) - eye
    f = f / np.linalg.norm(f)
    r = np.cross(f, [0.0, 1.0, 0.0])
    r = r / np.linalg.norm(r)
    u = np.cross(r, f)
    m = np.eye(4)
    m[0, :3], m[1, :3], m[2, :3] = r, u, -f
    m[:3, 3] = -m[:3, :3] @ eye
    return m.astype(np.float32)


def perspective(fov_y_deg: float, aspect: float, near: float, far: float) -> np.ndarray:
    """OpenGL projection matrix (column-vector convention), float32."""
    f = 1.0 / math.tan(math.radians(fov_y_deg) / 2)
    m = np.zeros((4, 4))
    m[0, 0] = f / aspect
    m[1, 1] = f
    m[2, 2] = (far + near) / (near - far)
    m[2, 3] = 2 * far * near / (near - far)
    m[3, 2] = -1.0
    return m.astype(np.float32)
