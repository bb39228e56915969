"""Recorded-format speed: write and read milliseconds per frame for .gbuf.zip and .npy windows.

Frames are synthetic but picture-like (flat regions, gradients, mild texture), so PNG compresses them
about as well as engine output; pure noise would be the worst case. Reads are measured in play order
and in random order, with the files in the OS page cache (just written).

    python -m bench.formats_bench [--frames 60] [--sizes 416x224 832x448] [--json out.json]
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from bench.harness import parser, print_table, size, write_json
from gbuffer.formats import GbufZipSource, GbufZipWriter, NpyWindowsSource, write_npy_windows
from gbuffer.frame import GBufferFrame


def scene_frames(n: int, width: int, height: int, seed: int = 0) -> list[GBufferFrame]:
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:height, 0:width].astype(np.float32)
    texture = rng.integers(-6, 7, (height, width, 1))
    frames = []
    for i in range(n):
        shift = 4 * i
        blocks = (((x + shift) // 48 + y // 40) % 5)[..., None] * np.array([40, 30, 20], np.float32)
        albedo = np.clip(blocks + 60 + texture, 0, 255)
        depth = np.repeat((255 * (1 - y / height))[..., None], 3, -1)
        metallic = np.repeat(((x + shift) // 96 % 2 * 200)[..., None], 3, -1)
        normal = np.stack([128 + 60 * np.sin((x + shift) / 50), 128 + 60 * np.cos(y / 40), 220 + 0 * x], -1)
        roughness = np.repeat((80 + ((x + y + shift) // 64 % 3) * 50)[..., None], 3, -1)
        data = np.stack([albedo, depth, metallic, normal, roughness]).astype(np.uint8)
        frames.append(GBufferFrame(i, i / 30, data))
    return frames


def timed_ms(fn, count: int) -> str:
    """'wall/cpu' milliseconds per item; CPU time is the steadier figure on a shared machine."""
    wall, cpu = time.perf_counter(), time.process_time()
    fn()
    return f"{(time.perf_counter() - wall) * 1000 / count:.1f}/{(time.process_time() - cpu) * 1000 / count:.1f}"


def read_all(source, order) -> None:
    for i in order:
        source[int(i)]


def bench_size(width: int, height: int, n: int, tmp: Path) -> list[dict]:
    frames = scene_frames(n, width, height)
    order = np.random.default_rng(1).permutation(n)
    rows = []

    path = tmp / f"bench-{width}x{height}.gbuf.zip"

    def write_zip() -> None:
        with GbufZipWriter(path, fps=30, source="formats_bench") as writer:
            for frame in frames:
                writer.write(frame)

    write_ms = timed_ms(write_zip, n)
    with GbufZipSource(path) as source:
        rows.append({"format": ".gbuf.zip", "size": f"{width}x{height}", "frames": n, "write_ms": write_ms,
                     "read_seq_ms": timed_ms(lambda: read_all(source, range(n)), n),
                     "read_random_ms": timed_ms(lambda: read_all(source, order), n),
                     "bytes_per_frame": path.stat().st_size // n})

    out = tmp / f"npy-{width}x{height}"
    write_ms = timed_ms(lambda: write_npy_windows(frames, out, window=16), n)
    windows = sorted(out.glob("*.npy"))
    with NpyWindowsSource(windows) as source:
        rows.append({"format": ".npy windows", "size": f"{width}x{height}", "frames": n, "write_ms": write_ms,
                     "read_seq_ms": timed_ms(lambda: read_all(source, range(n)), n),
                     "read_random_ms": timed_ms(lambda: read_all(source, order), n),
                     "bytes_per_frame": sum(p.stat().st_size for p in windows) // n})
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = parser(__doc__)
    ap.add_argument("--frames", type=int, default=60)
    ap.add_argument("--sizes", nargs="+", default=["416x224", "832x448"])
    args = ap.parse_args(argv)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for text in args.sizes:
            rows += bench_size(*size(text), args.frames, Path(tmp))
    print("ms per frame as wall/cpu")
    print_table(rows, (("format", "format"), ("size", "size"), ("frames", "frames"), ("write", "write_ms"),
                       ("read", "read_seq_ms"), ("random read", "read_random_ms"),
                       ("KB/frame", lambda r: f"{r['bytes_per_frame'] / 1024:.0f}")))
    write_json(args.json, rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
