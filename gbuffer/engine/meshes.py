"""Triangle meshes for the world and the kart, as one interleaved float32 vertex array each.

Vertex layout (14 floats): position xyz (m), normal xyz, albedo rgb (linear 0..1), uv (m or fractions, per
pattern), metallic, roughness, pattern id. Patterns (see shaders.py) vary albedo/metallic/roughness per
fragment so the G-buffer is rich without textures. The whole world is ~13k triangles.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from gbuffer.engine.track import HALF_WIDTH_M, KERB_WIDTH_M
from gbuffer.engine.world import World

FLOATS_PER_VERTEX = 14

# Pattern ids shared with the fragment shader.
PLAIN, GRASS, ROAD, KERB, WINDOWS, BARK, ROCK, WATER, LAVA, LEAVES = range(10)

TERRAIN_CELLS = 48        # terrain grid is TERRAIN_CELLS² quads
ROAD_STEP = 2             # one road cross-section every ROAD_STEP centre samples
SECTOR_M = 60.0           # world triangles are grouped into squares this wide for view culling


class MeshBuilder:
    """Collects triangle soups; `build()` interleaves them into (N, FLOATS_PER_VERTEX) float32."""

    def __init__(self) -> None:
        self._parts: list[np.ndarray] = []

    def add(self, tris: np.ndarray, color, metallic: float, roughness: float, pattern: int,
            uv: np.ndarray | None = None, normals: np.ndarray | None = None,
            outward_from: np.ndarray | tuple[float, float, float] | None = None) -> None:
        """`tris` (N, 3) positions, 3 per triangle. Without `normals`, faces are flat-shaded; with
        `outward_from` (3,), each face normal is flipped to point away from that centre point."""
        tris = np.asarray(tris, np.float64).reshape(-1, 3)
        n = len(tris)
        if normals is None:
            t = tris.reshape(-1, 3, 3)
            face = np.cross(t[:, 1] - t[:, 0], t[:, 2] - t[:, 0])
            face /= np.maximum(np.linalg.norm(face, axis=1, keepdims=True), 1e-12)
            if outward_from is not None:
                away = t.mean(axis=1) - np.asarray(outward_from, np.float64)
                face *= np.where((face * away).sum(axis=1, keepdims=True) < 0, -1.0, 1.0)
            else:  # open surfaces (ground, road, water) face up
                face *= np.where(face[:, 1:2] < 0, -1.0, 1.0)
            normals = np.repeat(face, 3, axis=0)
        out = np.empty((n, FLOATS_PER_VERTEX), np.float32)
        out[:, 0:3] = tris
        out[:, 3:6] = normals
        out[:, 6:9] = np.broadcast_to(np.asarray(color, np.float64), (n, 3))
        out[:, 9:11] = 0.0 if uv is None else np.asarray(uv).reshape(-1, 2)
        out[:, 11] = metallic
        out[:, 12] = roughness
        out[:, 13] = pattern
        # Wind every triangle counter-clockwise around its normal, so back faces can be culled.
        t = tris.reshape(-1, 3, 3)
        geometric = np.cross(t[:, 1] - t[:, 0], t[:, 2] - t[:, 0])
        flip = (geometric * np.asarray(normals).reshape(-1, 3, 3).mean(axis=1)).sum(axis=1) < 0
        per_triangle = out.reshape(-1, 3, FLOATS_PER_VERTEX)
        per_triangle[flip] = per_triangle[flip][:, [0, 2, 1]]
        self._parts.append(out)

    def build(self) -> np.ndarray:
        return np.concatenate(self._parts) if self._parts else np.zeros((0, FLOATS_PER_VERTEX), np.float32)


def _grid_triangles(points: np.ndarray) -> np.ndarray:
    """(R, C, k) grid of per-vertex values → (6 * (R-1) * (C-1), k) two triangles per cell."""
    a, b = points[:-1, :-1], points[:-1, 1:]
    c, d = points[1:, :-1], points[1:, 1:]
    return np.stack([a, c, b, b, c, d], axis=2).reshape(-1, points.shape[-1])


def _rotate_y(p: np.ndarray, yaw: float) -> np.ndarray:
    """Rotate (..., 3) points about +y so that local +x maps to world (cos yaw, 0, sin yaw)."""
    c, s = math.cos(yaw), math.sin(yaw)
    x, y, z = p[..., 0], p[..., 1], p[..., 2]
    return np.stack([x * c - z * s, y, x * s + z * c], axis=-1)


def box_triangles(size, yaw: float = 0.0, offset=(0.0, 0.0, 0.0)) -> tuple[np.ndarray, np.ndarray]:
    """Box of `size` = (x, y, z) extent with its base centre at `offset`: (36, 3) positions and (36, 2)
    uv in metres (u along the face, v up the face)."""
    sx, sy, sz = (float(v) / 2 for v in size)
    quads = []
    uvs = []
    for axis, sign in ((0, 1), (0, -1), (2, 1), (2, -1), (1, 1), (1, -1)):
        # Four corners of the face in local coordinates (base at y=0).
        if axis == 0:
            q = [(sign * sx, 0, -sz), (sign * sx, 0, sz), (sign * sx, 2 * sy, sz), (sign * sx, 2 * sy, -sz)]
            w, h = 2 * sz, 2 * sy
        elif axis == 2:
            q = [(-sx, 0, sign * sz), (sx, 0, sign * sz), (sx, 2 * sy, sign * sz), (-sx, 2 * sy, sign * sz)]
            w, h = 2 * sx, 2 * sy
        else:
            y = 2 * sy if sign > 0 else 0
            q = [(-sx, y, -sz), (sx, y, -sz), (sx, y, sz), (-sx, y, sz)]
            w, h = 2 * sx, 2 * sz
        corners = np.array(q, np.float64)
        quads.append(corners[[0, 1, 2, 0, 2, 3]])
        uv = np.array([(0, 0), (w, 0), (w, h), (0, h)], np.float64)
        uvs.append(uv[[0, 1, 2, 0, 2, 3]])
    pos = _rotate_y(np.concatenate(quads), yaw) + np.asarray(offset, np.float64)
    return pos, np.concatenate(uvs)


def lathe_triangles(profile, sides: int, offset, yaw: float = 0.0) -> np.ndarray:
    """Surface of revolution about +y: `profile` = [(radius, height), ...] bottom to top → (N, 3)."""
    ang = yaw + np.linspace(0, 2 * np.pi, sides + 1)
    rings = np.array([[(r * math.cos(a), h, r * math.sin(a)) for a in ang] for r, h in profile])
    return _grid_triangles(rings) + np.asarray(offset, np.float64)


def icosahedron() -> np.ndarray:
    """(20*3, 3) triangles of a unit icosahedron."""
    p = (1 + 5 ** 0.5) / 2
    v = np.array([(-1, p, 0), (1, p, 0), (-1, -p, 0), (1, -p, 0), (0, -1, p), (0, 1, p),
                  (0, -1, -p), (0, 1, -p), (p, 0, -1), (p, 0, 1), (-p, 0, -1), (-p, 0, 1)], np.float64)
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    faces = [(0, 11, 5), (0, 5, 1), (0, 1, 7), (0, 7, 10), (0, 10, 11), (1, 5, 9), (5, 11, 4), (11, 10, 2),
             (10, 7, 6), (7, 1, 8), (3, 9, 4), (3, 4, 2), (3, 2, 6), (3, 6, 8), (3, 8, 9), (4, 9, 5),
             (2, 4, 11), (6, 2, 10), (8, 6, 7), (9, 8, 1)]
    return v[np.array(faces).ravel()]


# ---- world ----------------------------------------------------------------------------------------------------

def _terrain(mb: MeshBuilder, world: World) -> None:
    x0, z0, x1, z1 = world.bounds
    xs = np.linspace(x0, x1, TERRAIN_CELLS + 1)
    zs = np.linspace(z0, z1, TERRAIN_CELLS + 1)
    gx, gz = np.meshgrid(xs, zs)
    index, lateral = world.track.nearest(gx, gz)
    index, lateral = index.reshape(gx.shape), lateral.reshape(gx.shape)
    h = world.ground_height(gx, gz, index)
    # Sink the grid under the road so the coarse cells never poke through it.
    under_road = np.abs(lateral) < HALF_WIDTH_M + KERB_WIDTH_M + 4.0
    h = np.where(under_road, h - 0.6, h)
    # Likewise under pits, so the pool surface is never hidden by a coarse cell.
    cell = (x1 - x0) / TERRAIN_CELLS
    for p in world.pits:
        inside = np.hypot(gx - p.x, gz - p.z) < p.radius + 0.7 * cell
        h = np.where(inside, np.minimum(h, p.level - 0.5), h)
    dhx = np.gradient(h, xs, axis=1)
    dhz = np.gradient(h, zs, axis=0)
    normal = np.stack([-dhx, np.ones_like(h), -dhz], axis=-1)
    normal /= np.linalg.norm(normal, axis=-1, keepdims=True)
    pos = np.stack([gx, h, gz], axis=-1)
    # Grass, drier and lighter on the hill tops.
    dry = np.clip((h - h.mean()) / 8.0, 0, 1)[..., None]
    color = np.array([0.20, 0.42, 0.12]) * (1 - dry) + np.array([0.45, 0.45, 0.22]) * dry
    mb.add(_grid_triangles(pos), _grid_triangles(color), 0.0, 0.9, GRASS,
           uv=_grid_triangles(np.stack([gx, gz], -1)), normals=_grid_triangles(normal))


def _road(mb: MeshBuilder, world: World) -> None:
    t = world.track
    idx = np.append(np.arange(0, t.samples, ROAD_STEP), 0)
    c, tan = t.centre[idx], t.tangent[idx]
    right = np.stack([-tan[:, 1], tan[:, 0]], axis=1)
    s = np.arange(len(idx)) * ROAD_STEP * t.spacing
    s[-1] = t.length  # the last cross-section closes the loop with the full length

    def strip(lat0: float, lat1: float, lift: float):
        lats = np.array([lat0, lat1])
        xz = c[:, None, :] + right[:, None, :] * lats[None, :, None]   # (K, 2, 2)
        y = world.ground_height(xz[..., 0], xz[..., 1], np.repeat(idx[:, None], 2, axis=1)) + lift
        pos = np.stack([xz[..., 0], y, xz[..., 1]], axis=-1)
        uv = np.stack([np.broadcast_to(lats / HALF_WIDTH_M, (len(idx), 2)),
                       np.broadcast_to(s[:, None], (len(idx), 2))], axis=-1)
        return _grid_triangles(pos), _grid_triangles(uv)

    tris, uv = strip(-HALF_WIDTH_M, HALF_WIDTH_M, 0.05)
    mb.add(tris, (0.22, 0.22, 0.24), 0.0, 0.75, ROAD, uv=uv)
    for lat0, lat1 in ((-HALF_WIDTH_M - KERB_WIDTH_M, -HALF_WIDTH_M), (HALF_WIDTH_M, HALF_WIDTH_M + KERB_WIDTH_M)):
        tris, uv = strip(lat0, lat1, 0.08)
        mb.add(tris, (0.8, 0.1, 0.1), 0.0, 0.6, KERB, uv=uv)


def _obstacles(mb: MeshBuilder, world: World) -> None:
    for i, o in enumerate(world.obstacles):
        base = float(world.ground_height(o.x, o.z))
        if o.kind == "tree":
            k = o.size[0]
            trunk = lathe_triangles([(0.35 * k, -0.5), (0.25 * k, 2.2 * k)], 5, (o.x, base, o.z), o.yaw)
            mb.add(trunk, (0.35, 0.22, 0.12), 0.0, 0.9, BARK, outward_from=(o.x, base + k, o.z),
                   uv=trunk[:, [0, 1]])
            green = ((0.10, 0.35, 0.10), (0.16, 0.42, 0.08), (0.08, 0.28, 0.14))[o.variant % 3]
            # Two tiers of foliage (radius, height): a closed bottom, a lip, a pointed top.
            profile = [(0.0, 1.8), (2.2, 1.8), (1.3, 3.8), (1.7, 3.6), (0.0, 6.2)]
            crown = lathe_triangles([(r * k, h * k) for r, h in profile], 6, (o.x, base, o.z), o.yaw)
            mb.add(crown, green, 0.0, 0.8, LEAVES, outward_from=(o.x, base + 3.0 * k, o.z), uv=crown[:, [0, 2]])
        elif o.kind == "rock":
            rng = np.random.default_rng((world.seed, i))
            tris = icosahedron()
            # Jitter each of the 12 distinct corners the same way wherever it appears.
            keys = np.round(tris * 1000).astype(np.int64)
            _, inverse = np.unique(keys, axis=0, return_inverse=True)
            jitter = rng.uniform(0.75, 1.25, inverse.max() + 1)[inverse.ravel()]
            local = tris * jitter[:, None] * np.array([1.0, 0.7, 1.0]) * o.radius
            pos = _rotate_y(local, o.yaw) + np.array([o.x, base + 0.3 * o.radius, o.z])
            wet = o.variant % 2 == 0  # wet rocks are darker and glossy
            mb.add(pos, (0.28, 0.27, 0.26) if wet else (0.5, 0.48, 0.45), 0.0, 0.15 if wet else 0.85, ROCK,
                   outward_from=(o.x, base + 0.3 * o.radius, o.z), uv=pos[:, [0, 2]])
        elif o.kind == "building":
            w, d, h = o.size
            wall = ((0.75, 0.72, 0.66), (0.62, 0.35, 0.28), (0.55, 0.6, 0.68), (0.85, 0.82, 0.7))[o.variant % 4]
            pos, uv = box_triangles((w, h + 2.0, d), o.yaw, (o.x, base - 2.0, o.z))
            walls, roof = slice(0, 24), slice(24, 30)
            mb.add(pos[walls], wall, 0.0, 0.85, WINDOWS, uv=uv[walls] - np.array([0.0, 2.0]),
                   outward_from=(o.x, base + h / 2, o.z))
            mb.add(pos[roof], (0.25, 0.25, 0.27), 0.0, 0.7, PLAIN, outward_from=(o.x, base, o.z))
            # A metal rooftop unit.
            unit, _ = box_triangles((w * 0.3, 1.5, d * 0.3), o.yaw, (o.x, base + h, o.z))
            mb.add(unit, (0.7, 0.7, 0.72), 1.0, 0.35, PLAIN, outward_from=(o.x, base + h + 0.75, o.z))


def _pits(mb: MeshBuilder, world: World) -> None:
    for p in world.pits:
        ang = np.linspace(0, 2 * np.pi, 25)
        rim = np.stack([p.x + (p.radius + 0.5) * np.cos(ang), np.full_like(ang, p.level),
                        p.z + (p.radius + 0.5) * np.sin(ang)], axis=1)
        centre = np.array([p.x, p.level, p.z])
        tris = np.stack([np.broadcast_to(centre, (24, 3)), rim[1:], rim[:-1]], axis=1).reshape(-1, 3)
        if p.kind == "water":
            mb.add(tris, (0.05, 0.2, 0.35), 0.0, 0.05, WATER, uv=tris[:, [0, 2]])
        else:
            mb.add(tris, (1.0, 0.35, 0.05), 0.0, 0.5, LAVA, uv=tris[:, [0, 2]])


def _mountains(mb: MeshBuilder, world: World) -> None:
    """A ring of distant peaks so the horizon has depth; the terrain square's corners run into it."""
    x0, z0, x1, z1 = world.bounds
    cx, cz, side = (x0 + x1) / 2, (z0 + z1) / 2, x1 - x0
    rng = np.random.default_rng((world.seed, 7))
    k = 40
    ang = np.linspace(0, 2 * np.pi, k + 1)
    peak = rng.uniform(25, 60, k + 1)
    peak[-1] = peak[0]
    radii = np.array([0.5 * side, 0.72 * side])
    ring = np.stack([cx + radii[None, :] * np.cos(ang)[:, None],
                     np.stack([np.full(k + 1, -5.0), peak], axis=1),
                     cz + radii[None, :] * np.sin(ang)[:, None]], axis=-1)
    inner = ring[:, 0]
    inner[:, 1] = world.terrain(inner[:, 0], inner[:, 2]) - 1.0
    tris = _grid_triangles(ring)
    mb.add(tris, (0.35, 0.38, 0.3), 0.0, 0.95, ROCK, uv=tris[:, [0, 2]] * 0.2)


@dataclass(frozen=True)
class Sector:
    """A contiguous run of world vertices in one patch of ground, with a bounding sphere for culling."""

    first: int            # first vertex
    count: int            # number of vertices
    centre: tuple[float, float, float]
    radius: float


def build_world_mesh(world: World) -> tuple[np.ndarray, list[Sector]]:
    """Every static triangle of the world, interleaved (N, FLOATS_PER_VERTEX) float32, grouped into square
    sectors of SECTOR_M metres so the renderer can skip those outside the view and draw the rest front to
    back (early depth testing then skips shading what is hidden)."""
    mb = MeshBuilder()
    # Within a sector: road before the ground under it, for the same reason.
    _road(mb, world)
    _pits(mb, world)
    _obstacles(mb, world)
    _terrain(mb, world)
    _mountains(mb, world)
    vertices = mb.build()
    tris = vertices[:, :3].reshape(-1, 3, 3).astype(np.float64)
    centroid = tris.mean(axis=1)
    cell = np.floor(centroid[:, [0, 2]] / SECTOR_M).astype(np.int64)
    cell -= cell.min(axis=0)
    key = cell[:, 0] * (cell[:, 1].max() + 1) + cell[:, 1]
    order = np.argsort(key, kind="stable")
    vertices = vertices.reshape(-1, 3, FLOATS_PER_VERTEX)[order].reshape(-1, FLOATS_PER_VERTEX)
    key, tris = key[order], tris[order]
    sectors = []
    starts = np.flatnonzero(np.diff(key, prepend=-1))
    for start, end in zip(starts, np.append(starts[1:], len(key))):
        points = tris[start:end].reshape(-1, 3)
        centre = (points.min(axis=0) + points.max(axis=0)) / 2
        radius = float(np.linalg.norm(points - centre, axis=1).max())
        centre_xyz = (float(centre[0]), float(centre[1]), float(centre[2]))
        sectors.append(Sector(int(start) * 3, int(end - start) * 3, centre_xyz, radius))
    return vertices, sectors


def world_mesh(world: World) -> tuple[np.ndarray, list[Sector]]:
    """build_world_mesh(world), kept with the world (read-only: a VBO is filled from it): a shared world
    (world.shared_world) is meshed once per process, not on every engine session's first frame."""
    mesh = world.__dict__.get("_mesh")
    if mesh is None:
        mesh = build_world_mesh(world)
        mesh[0].flags.writeable = False
        world.__dict__["_mesh"] = mesh
    return mesh


def build_kart_mesh() -> np.ndarray:
    """The kart in its own frame: +x forward, +y up, origin on the ground between the wheels."""
    mb = MeshBuilder()

    def part(size, offset, color, metallic, roughness, pattern=PLAIN):
        pos, _ = box_triangles(size, 0.0, offset)
        centre = np.asarray(offset) + np.array([0.0, size[1] / 2, 0.0])
        mb.add(pos, color, metallic, roughness, pattern, outward_from=centre)

    part((2.0, 0.35, 1.1), (0.0, 0.25, 0.0), (0.75, 0.08, 0.06), 0.7, 0.3)     # chassis
    part((0.6, 0.25, 1.0), (0.95, 0.25, 0.0), (0.9, 0.85, 0.1), 0.7, 0.3)      # nose
    part((0.5, 0.5, 0.5), (-0.2, 0.6, 0.0), (0.1, 0.1, 0.12), 0.0, 0.8)        # seat + driver body
    part((0.35, 0.35, 0.35), (-0.15, 1.1, 0.0), (0.95, 0.95, 0.95), 0.3, 0.25)  # helmet
    part((0.2, 0.08, 1.3), (-1.0, 0.85, 0.0), (0.1, 0.1, 0.1), 0.9, 0.2)       # spoiler
    part((0.08, 0.4, 0.08), (-1.0, 0.45, 0.0), (0.6, 0.6, 0.6), 1.0, 0.3)      # spoiler post
    for wx in (0.7, -0.7):
        for wz in (0.65, -0.65):
            part((0.55, 0.5, 0.3), (wx, 0.0, wz), (0.05, 0.05, 0.05), 0.0, 0.95)  # wheels
    return mb.build()
