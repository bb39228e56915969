"""Warp error of the recorded truth against the same frames shuffled or frozen: how much the measure separates a
temporally consistent sequence from one that is not (training/eval_regions.py). Records drives with
`record --rgb` (beauty pass, sun mask and camera per frame) of the built-in engine or Panda3D's scene, then
reprojects frame t-1 into t.

    python -m bench.warp_error_bench [--engine demo|panda3d] [--seeds 3 4 5] [--frames 64] [--size 160x96]
                                     [--json out.json]
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np

from bench.harness import parser, print_table, size, write_json
from studio.cli import main
from training.eval_frames import open_held_out
from training.eval_regions import recorded_truth, region_masks, warp_error, warps


def measure(path: Path, seed: int) -> dict:
    test = open_held_out(path, None, None)
    truth = recorded_truth(test)
    gbuffer = test.gbuffer()
    pair_warps = warps(gbuffer, truth.cameras)
    rgb = test.rgb()
    shuffled = rgb[np.random.default_rng(seed).permutation(len(rgb))]
    masks = region_masks(truth.sun, gbuffer)
    surface = masks["shadow"].sum() + masks["lit"].sum()
    return {"seed": seed, "frames": len(rgb), "truth": warp_error(rgb, pair_warps),
            "shuffled": warp_error(shuffled, pair_warps),
            "frozen": warp_error(np.repeat(rgb[:1], len(rgb), axis=0), pair_warps),
            "seen_twice": round(float(np.mean([w.valid.mean() for w in pair_warps])), 3),
            "shadow_fraction": round(float(masks["shadow"].sum() / max(surface, 1)), 4)}


def run(seeds: list[int], frames: int, width: int, height: int, engine: str = "demo") -> list[dict]:
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for seed in seeds:
            path = Path(tmp) / f"seed{seed}.gbuf.zip"
            assert main(["record", "--engine", engine, "--frames", str(frames), "--size", f"{width}x{height}",
                         "--seed", str(seed), "--rgb", "-o", str(path)]) == 0
            rows.append(measure(path, seed))
    return rows


def cli() -> None:
    p = parser(__doc__)
    p.add_argument("--engine", choices=("demo", "panda3d"), default="demo")
    p.add_argument("--seeds", type=int, nargs="+", default=[3, 4, 5])
    p.add_argument("--frames", type=int, default=64)
    p.add_argument("--size", type=size, default=(160, 96))
    a = p.parse_args()
    rows = run(a.seeds, a.frames, *a.size, a.engine)
    print_table(rows, [("seed", "seed"), ("frames", "frames"), ("truth", "truth"), ("shuffled", "shuffled"),
                       ("frozen", "frozen"), ("seen twice", "seen_twice"), ("shadow", "shadow_fraction")])
    write_json(a.json, {"engine": a.engine, "size": list(a.size), "frames": a.frames, "rows": rows})


if __name__ == "__main__":
    cli()
