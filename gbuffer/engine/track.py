"""The closed race track: a smooth periodic spline through seeded control points, sampled by arc length.

World axes: x east, z south, y up (OpenGL convention); lengths in metres.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

TRACK_SAMPLES = 1024          # centre-line samples, evenly spaced by arc length
HALF_WIDTH_M = 6.0            # road half width
KERB_WIDTH_M = 0.8            # red/white kerb outside the road on each side


def _catmull_rom_closed(points: np.ndarray, per_segment: int) -> np.ndarray:
    """(N, 2) control points → (N*per_segment, 2) points on the closed uniform Catmull-Rom curve."""
    n = len(points)
    t = np.arange(per_segment) / per_segment
    t2, t3 = t * t, t * t * t
    out = []
    for i in range(n):
        p0, p1, p2, p3 = (points[(i + k) % n] for k in (-1, 0, 1, 2))
        seg = 0.5 * ((2 * p1)[None] + (-p0 + p2)[None] * t[:, None]
                     + (2 * p0 - 5 * p1 + 4 * p2 - p3)[None] * t2[:, None]
                     + (-p0 + 3 * p1 - 3 * p2 + p3)[None] * t3[:, None])
        out.append(seg)
    return np.concatenate(out)


def _resample_closed(curve: np.ndarray, count: int) -> tuple[np.ndarray, float]:
    """Resample a closed polyline (M, 2) to `count` points evenly spaced by arc length; also its length."""
    closed = np.vstack([curve, curve[:1]])
    seg = np.linalg.norm(np.diff(closed, axis=0), axis=1)
    cum = np.concatenate([[0.0], np.cumsum(seg)])
    length = float(cum[-1])
    s = np.arange(count) * (length / count)
    x = np.interp(s, cum, closed[:, 0])
    z = np.interp(s, cum, closed[:, 1])
    return np.stack([x, z], axis=1), length


def _smooth_periodic(values: np.ndarray, sigma_samples: float) -> np.ndarray:
    """Gaussian low-pass of a periodic 1-D signal (FFT, so the loop closes smoothly)."""
    n = len(values)
    freq = np.fft.rfftfreq(n)
    kernel = np.exp(-0.5 * (2 * np.pi * freq * sigma_samples) ** 2)
    return np.fft.irfft(np.fft.rfft(values) * kernel, n)


@dataclass
class Track:
    """Centre line `centre` (S, 2) in x/z, unit `tangent` (S, 2), `height` (S,) and `curvature` (S,) in 1/m,
    evenly spaced by arc length `spacing` over a loop of `length` metres. Sample 0 is the start line."""

    centre: np.ndarray
    tangent: np.ndarray
    height: np.ndarray
    curvature: np.ndarray
    length: float
    half_width: float = HALF_WIDTH_M

    @property
    def spacing(self) -> float:
        return self.length / len(self.centre)

    @property
    def samples(self) -> int:
        return len(self.centre)

    @classmethod
    def generate(cls, rng: np.random.Generator, terrain_height) -> "Track":
        """A star-shaped loop (so it never crosses itself) of 10 control points, radius 70..120 m.

        `terrain_height(x, z)` gives the natural ground; the road follows it, low-passed so hills stay drivable.
        """
        count = 10
        angles = np.linspace(0.0, 2 * np.pi, count, endpoint=False)
        angles = angles + rng.uniform(-0.18, 0.18, count)
        radius = rng.uniform(70.0, 120.0, count)
        stretch = rng.uniform(0.8, 1.25)  # an oval rather than a circle
        control = np.stack([radius * np.cos(angles) * stretch, radius * np.sin(angles) / stretch], axis=1)
        dense = _catmull_rom_closed(control, 64)
        centre, length = _resample_closed(dense, TRACK_SAMPLES)
        forward = np.roll(centre, -1, axis=0) - np.roll(centre, 1, axis=0)
        tangent = forward / np.linalg.norm(forward, axis=1, keepdims=True)
        # Signed curvature from the turn of the tangent between neighbouring samples.
        spacing = length / TRACK_SAMPLES
        nxt = np.roll(tangent, -1, axis=0)
        turn = np.arctan2(tangent[:, 0] * nxt[:, 1] - tangent[:, 1] * nxt[:, 0],
                          (tangent * nxt).sum(axis=1))
        curvature = _smooth_periodic(turn / spacing, 3.0)
        height = _smooth_periodic(terrain_height(centre[:, 0], centre[:, 1]), 25.0)
        return cls(centre, tangent, height, curvature, length)

    def nearest(self, x: np.ndarray | float, z: np.ndarray | float, chunk: int = 2048) -> tuple[np.ndarray, np.ndarray]:
        """Nearest centre sample index and signed lateral offset (m, + = right of travel) for points x, z."""
        x = np.atleast_1d(np.asarray(x, np.float64))
        z = np.atleast_1d(np.asarray(z, np.float64))
        index = np.empty(x.shape, np.int64)
        for start in range(0, x.size, chunk):
            sl = slice(start, start + chunk)
            dx = x.ravel()[sl, None] - self.centre[None, :, 0]
            dz = z.ravel()[sl, None] - self.centre[None, :, 1]
            index.ravel()[sl] = np.argmin(dx * dx + dz * dz, axis=1)
        return index, self.lateral(index, x, z)

    def nearest_near(self, hint: int, x: float, z: float, window: int = 24) -> int:
        """Nearest centre sample within `window` samples of `hint` (cheap per-tick tracking of one kart)."""
        idx = (hint + np.arange(-window, window + 1)) % self.samples
        d = (self.centre[idx, 0] - x) ** 2 + (self.centre[idx, 1] - z) ** 2
        return int(idx[int(np.argmin(d))])

    def lateral(self, index, x, z):
        """Signed offset from the centre line at `index`; + is to the right when driving forward."""
        c = self.centre[index]
        t = self.tangent[index]
        dx, dz = x - c[..., 0], z - c[..., 1]
        # Right of travel in x/z with y up: (-t_z, t_x).
        return dx * -t[..., 1] + dz * t[..., 0]

    def point_at(self, s_m: float) -> tuple[float, float]:
        """Centre-line x, z at arc length `s_m` (wrapping), linearly interpolated."""
        f = (s_m / self.spacing) % self.samples
        i = int(f)
        a = f - i
        p = self.centre[i] * (1 - a) + self.centre[(i + 1) % self.samples] * a
        return float(p[0]), float(p[1])

    def max_curvature_ahead(self, index: int, distance_m: float) -> float:
        """Largest |curvature| over the next `distance_m` metres of track (1/m)."""
        n = max(1, int(distance_m / self.spacing))
        idx = (index + np.arange(n)) % self.samples
        return float(np.abs(self.curvature[idx]).max())
