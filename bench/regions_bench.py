"""What a per-pixel map cannot follow, measured on the engine's own drives: the per-pixel baseline (fitted as
eval fits it, training/baselines.py) scored on `original` over shadowed and lit surface pixels, and its warp error
beside the truth's (training/eval_regions.py). Records its own train and held-out drives with `record --rgb`.

    python -m bench.regions_bench [--engine demo|panda3d] [--train 0 1] [--held 3 4] [--frames 160]
                                  [--size 160x96] [--json out.json]
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np

from bench.harness import parser, print_table, size, write_json
from renderer import create_renderer
from studio.cli import main
from training.eval_frames import open_held_out
from training.eval_regions import RegionScore, recorded_truth, region_masks, warp_error, warps
from training.eval_run import fit_per_pixel
from training.eval_tasks import BLOCK
from training.style_targets import ORIGINAL


def record(path: Path, engine: str, seed: int, frames: int, width: int, height: int) -> str:
    assert main(["record", "--engine", engine, "--frames", str(frames), "--size", f"{width}x{height}", "--seed",
                 str(seed), "--rgb", "-o", str(path)]) == 0
    return str(path)


def run(engine: str, train: list[int], held: list[int], frames: int, width: int, height: int) -> list[dict]:
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        fit = [record(Path(tmp) / f"train{s}.gbuf.zip", engine, s, frames, width, height) for s in train]
        tests = [open_held_out(record(Path(tmp) / f"held{s}.gbuf.zip", engine, s, frames, width, height), None,
                               None) for s in held]
        maps, _ = fit_per_pixel(fit, tests, [ORIGINAL], (width, height), create_renderer("reference"), 0)
        for seed, test in zip(held, tests):
            truth, gbuffer, rgb = recorded_truth(test), test.gbuffer(), test.rgb()
            predicted = np.concatenate([maps[ORIGINAL].predict(gbuffer[s:s + BLOCK]) for s in range(0, len(test),
                                                                                                   BLOCK)])
            masks = region_masks(truth.sun, gbuffer)
            scores = {name: RegionScore() for name in masks}
            for name, mask in masks.items():
                for i in range(len(test)):
                    scores[name].update(predicted[i], rgb[i], mask[i])
            pair_warps = warps(gbuffer, truth.cameras)
            rows.append({"seed": seed, "frames": len(test),
                         "shadow_fraction": round(float(masks["shadow"].mean()), 4),
                         "per_pixel_shadow_psnr": scores["shadow"].summary()["psnr"],
                         "per_pixel_lit_psnr": scores["lit"].summary()["psnr"],
                         "per_pixel_shadow_ssim": scores["shadow"].summary()["ssim"],
                         "per_pixel_lit_ssim": scores["lit"].summary()["ssim"],
                         "warp_truth": warp_error(rgb, pair_warps),
                         "warp_per_pixel": warp_error(predicted, pair_warps)})
    return rows


def cli() -> None:
    p = parser(__doc__)
    p.add_argument("--engine", choices=("demo", "panda3d"), default="demo")
    p.add_argument("--train", type=int, nargs="+", default=[0, 1])
    p.add_argument("--held", type=int, nargs="+", default=[3, 4])
    p.add_argument("--frames", type=int, default=160)
    p.add_argument("--size", type=size, default=(160, 96))
    a = p.parse_args()
    rows = run(a.engine, a.train, a.held, a.frames, *a.size)
    print_table(rows, [("seed", "seed"), ("frames", "frames"), ("shadow px", "shadow_fraction"),
                       ("pp shadow dB", "per_pixel_shadow_psnr"), ("pp lit dB", "per_pixel_lit_psnr"),
                       ("pp shadow ssim", "per_pixel_shadow_ssim"), ("pp lit ssim", "per_pixel_lit_ssim"),
                       ("warp truth", "warp_truth"), ("warp pp", "warp_per_pixel")])
    write_json(a.json, {"engine": a.engine, "size": list(a.size), "frames": a.frames, "train": a.train,
                        "rows": rows})


if __name__ == "__main__":
    cli()
