"""Learning check: train the tiny flash transformer on CPU to map G-buffers to prompt-tinted albedo, then
measure how close the 4-step sampler gets (relative MSE against the targets; see
renderer/flash/learning_check.py for the task).

    python -m bench.flash_learning [--steps 300] [--seeds 0 1] [--threads 1]
"""

from __future__ import annotations

import argparse
import json

import torch

from renderer.flash.learning_check import learning_check


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0])
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    for seed in args.seeds:
        print(json.dumps({"seed": seed, **learning_check(args.steps, seed)}), flush=True)


if __name__ == "__main__":
    main()
