"""The seeded world: rolling terrain, the track laid into it, and the scenery the kart can hit.

Everything here is plain numpy and fully determined by the seed; the renderer and the physics both read it.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field

import numpy as np

from gbuffer.engine.track import HALF_WIDTH_M, KERB_WIDTH_M, Track

VERGE_M = 14.0          # the ground blends from road height to natural terrain over this many metres
WORLD_MARGIN_M = 90.0   # terrain extends this far beyond the track's bounding box


@dataclass(frozen=True)
class Obstacle:
    """A solid scenery object. `kind` in tree/rock/building; collision is a circle of `radius` or,
    for buildings, a box of `size` = (width along yaw, depth, height) rotated by `yaw` (radians)."""

    kind: str
    x: float
    z: float
    radius: float
    yaw: float = 0.0
    size: tuple[float, float, float] = (0.0, 0.0, 0.0)
    variant: int = 0


@dataclass(frozen=True)
class Pit:
    """A sunken pool the kart should avoid: water slows it down, lava sends it back to the track."""

    kind: str  # "water" | "lava"
    x: float
    z: float
    radius: float
    level: float  # surface height (m)


class Terrain:
    """Natural ground height: a seeded sum of a few smooth waves (hills 60..250 m across, up to ~12 m)."""

    def __init__(self, rng: np.random.Generator):
        waves = 6
        self.amplitude = rng.uniform(1.0, 3.0, waves)
        wavelength = rng.uniform(60.0, 250.0, waves)
        angle = rng.uniform(0.0, 2 * np.pi, waves)
        k = 2 * np.pi / wavelength
        self.kx, self.kz = k * np.cos(angle), k * np.sin(angle)
        self.phase = rng.uniform(0.0, 2 * np.pi, waves)

    def __call__(self, x, z):
        x = np.asarray(x, np.float64)[..., None]
        z = np.asarray(z, np.float64)[..., None]
        return (self.amplitude * np.sin(self.kx * x + self.kz * z + self.phase)).sum(axis=-1)


def _smoothstep(edge0: float, edge1: float, x):
    t = np.clip((np.asarray(x) - edge0) / (edge1 - edge0), 0.0, 1.0)
    return t * t * (3.0 - 2.0 * t)


@dataclass
class World:
    """Terrain + track + scenery for one seed. `bounds` = (x0, z0, x1, z1) of the terrain square."""

    seed: int
    terrain: Terrain
    track: Track
    obstacles: list[Obstacle] = field(default_factory=list)
    pits: list[Pit] = field(default_factory=list)
    bounds: tuple[float, float, float, float] = (0.0, 0.0, 0.0, 0.0)

    @classmethod
    def generate(cls, seed: int) -> "World":
        rng = np.random.default_rng(seed)
        terrain = Terrain(rng)
        track = Track.generate(rng, terrain)
        lo = track.centre.min(axis=0) - WORLD_MARGIN_M
        hi = track.centre.max(axis=0) + WORLD_MARGIN_M
        side = float((hi - lo).max())
        mid = (lo + hi) / 2
        bounds = (float(mid[0] - side / 2), float(mid[1] - side / 2),
                  float(mid[0] + side / 2), float(mid[1] + side / 2))
        world = cls(seed, terrain, track, bounds=bounds)
        world._place_scenery(rng)
        return world

    # ---- ground ---------------------------------------------------------------------------------------------

    def road_height(self, index, x, z):
        """Road surface height at x, z given the nearest centre sample `index` (interpolated along the road)."""
        t = self.track
        n = t.samples
        c = t.centre[index]
        along = ((x - c[..., 0]) * t.tangent[index, 0] + (z - c[..., 1]) * t.tangent[index, 1]) / t.spacing
        slope = (t.height[(index + 1) % n] - t.height[(index - 1) % n]) / 2
        return t.height[index] + along * slope

    def ground_height(self, x, z, index=None):
        """Ground height (m) at x, z: the road across its width, natural terrain beyond the verge,
        flattened into a bowl under pits. `index` (nearest centre sample) can be given to save a search."""
        x = np.asarray(x, np.float64)
        z = np.asarray(z, np.float64)
        if index is None:
            index, lateral = self.track.nearest(x, z)
            index, lateral = index.reshape(x.shape), lateral.reshape(x.shape)
        else:
            lateral = self.track.lateral(index, x, z)
        edge = HALF_WIDTH_M + KERB_WIDTH_M
        w = _smoothstep(edge + 1.0, edge + VERGE_M, np.abs(lateral))
        h = self.road_height(index, x, z) * (1 - w) + self.terrain(x, z) * w
        for pit in self.pits:
            r = np.hypot(x - pit.x, z - pit.z)
            if not np.any(r < pit.radius + 4.0):
                continue
            bowl = pit.level - 0.8 * (1 - _smoothstep(0.0, pit.radius, r))
            h = np.where(r < pit.radius + 4.0,
                         bowl + (h - bowl) * _smoothstep(pit.radius, pit.radius + 4.0, r), h)
        return h

    # ---- scenery --------------------------------------------------------------------------------------------

    def _free(self, x: float, z: float, radius: float, clearance: float) -> bool:
        """True if a circle fits: off the road by `clearance`, inside the terrain, clear of other things."""
        x0, z0, x1, z1 = self.bounds
        if not (x0 + 10 < x < x1 - 10 and z0 + 10 < z < z1 - 10):
            return False
        _, lateral = self.track.nearest(x, z)
        if abs(float(lateral[0])) < HALF_WIDTH_M + KERB_WIDTH_M + clearance + radius:
            return False
        for o in self.obstacles:
            if np.hypot(o.x - x, o.z - z) < o.radius + radius + 1.5:
                return False
        for p in self.pits:
            if np.hypot(p.x - x, p.z - z) < p.radius + radius + 5.0:
                return False
        return True

    def _place_scenery(self, rng: np.random.Generator) -> None:
        t = self.track
        x0, z0, x1, z1 = self.bounds

        def beside_track(near: float, far: float) -> tuple[float, float, int]:
            i = int(rng.integers(t.samples))
            side = rng.choice([-1.0, 1.0])
            d = side * rng.uniform(near, far)
            # Right of travel is (-t_z, t_x).
            return (float(t.centre[i, 0] - t.tangent[i, 1] * d),
                    float(t.centre[i, 1] + t.tangent[i, 0] * d), i)

        for kind, count in (("lava", 2), ("water", 2)):
            placed = tries = 0
            while placed < count and tries < 200:
                tries += 1
                radius = float(rng.uniform(5.0, 9.0))
                x, z, _ = beside_track(HALF_WIDTH_M + radius + 6.0, HALF_WIDTH_M + radius + 25.0)
                if self._free(x, z, radius, 6.0):
                    level = float(self.terrain(x, z)) - 0.4
                    self.pits.append(Pit(kind, x, z, radius, level))
                    placed += 1

        for count, kind, near, far in ((10, "building", 16.0, 40.0), (30, "rock", 8.0, 60.0)):
            placed = tries = 0
            while placed < count and tries < 400:
                tries += 1
                x, z, i = beside_track(near, far)
                if kind == "building":
                    w, d, h = (float(v) for v in rng.uniform((8, 8, 6), (16, 12, 18)))
                    radius = 0.5 * float(np.hypot(w, d))
                    yaw = float(np.arctan2(t.tangent[i, 1], t.tangent[i, 0]))
                    size = (w, d, h)
                else:
                    radius, yaw, size = float(rng.uniform(0.8, 2.6)), float(rng.uniform(0, 2 * np.pi)), (0, 0, 0)
                if self._free(x, z, radius, 2.0):
                    self.obstacles.append(Obstacle(kind, x, z, radius, yaw, size, int(rng.integers(4))))
                    placed += 1

        placed = tries = 0
        while placed < 70 and tries < 600:
            tries += 1
            # Half the trees line the track, half are spread over the land.
            if tries % 2:
                x, z, _ = beside_track(5.0, 30.0)
            else:
                x, z = float(rng.uniform(x0, x1)), float(rng.uniform(z0, z1))
            if self._free(x, z, 0.6, 2.0):
                scale = float(rng.uniform(0.8, 1.5))
                self.obstacles.append(Obstacle("tree", x, z, 0.6 * scale, float(rng.uniform(0, 6.28)),
                                               (scale, scale, scale), int(rng.integers(3))))
                placed += 1

    def pit_at(self, x: float, z: float) -> Pit | None:
        for p in self.pits:
            if (p.x - x) ** 2 + (p.z - z) ** 2 < p.radius * p.radius:
                return p
        return None


@functools.lru_cache(maxsize=4)
def shared_world(seed: int) -> World:
    """World.generate(seed), once per process: a world does not change once generated, so the engine sessions
    of one seed share it, and its mesh (meshes.world_mesh), instead of spending a few hundred milliseconds of
    their first frame building both again."""
    return World.generate(seed)

