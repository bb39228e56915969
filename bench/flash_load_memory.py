"""Peak memory (RSS) while loading a `full` weights directory in bf16 on the CPU, against the files' size.

    python -m bench.flash_load_memory --dir /tmp/flash-full --make     # init-random full first (~2.6 GB)
    python -m bench.flash_load_memory --dir /tmp/flash-full [--eager]

Each load runs in a fresh process (ru_maxrss is a lifetime peak). `baseline` is the RSS after importing torch and
diffusers, before anything is loaded; the goal (issue 10) is peak <= 1.3 x the bf16 files. `--eager` also measures
the old way (build the model in fp32 on the CPU, then load_state_dict) for comparison.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

from bench.harness import ROOT

CHILD = r"""
import json, resource, sys, time
import torch, diffusers
from renderer.flash.pipeline import FlashPipeline
from renderer.flash import weights
def rss(): return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
torch.set_num_threads(1)
base = rss(); t = time.perf_counter()
if {eager!r}:
    from renderer.flash.transformer import FlashTransformer
    from safetensors.torch import load_file
    plan = weights.WeightsPlan({dir!r})
    model = FlashTransformer(plan.config)                       # fp32 on the CPU, randomly initialised
    state = {{**load_file({dir!r} + "/" + weights.TRANSFORMER_WEIGHTS),
             **load_file({dir!r} + "/" + weights.TRANSFORMER_PARTIAL)}}
    model.load_state_dict(state, strict=True)
    model.to(torch.bfloat16)
else:
    FlashPipeline.from_dir({dir!r}, device="cpu", dtype=torch.bfloat16)
print(json.dumps({{"baseline_bytes": base, "peak_bytes": rss(), "seconds": time.perf_counter() - t}}))
"""


def measure(directory: Path, eager: bool) -> dict:
    code = CHILD.format(dir=str(directory), eager=eager)
    # `-c` puts the working directory first on the child's path: the checkout's root
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True, cwd=ROOT).stdout
    return json.loads(out.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", type=Path, required=True)
    ap.add_argument("--make", action="store_true", help="write random full weights there first (init-random)")
    ap.add_argument("--eager", action="store_true", help="also measure the old fp32-build-then-load way")
    args = ap.parse_args()
    if args.make and not args.dir.exists():
        subprocess.run([sys.executable, "-m", "studio.cli", "flash", "init-random", str(args.dir), "--config", "full"],
                       check=True, cwd=ROOT)
    files = sum(p.stat().st_size for p in args.dir.rglob("*.safetensors") if p.name != "text_embeddings.safetensors")
    rows = {"meta_bf16": measure(args.dir, False)}
    if args.eager:
        rows["eager_fp32_then_bf16"] = measure(args.dir, True)
    for name, r in rows.items():
        print(json.dumps({"load": name, "files_gb": round(files / 1e9, 3),
                          "baseline_gb": round(r["baseline_bytes"] / 1e9, 3),
                          "peak_gb": round(r["peak_bytes"] / 1e9, 3),
                          "peak_over_files": round(r["peak_bytes"] / files, 3),
                          "added_over_files": round((r["peak_bytes"] - r["baseline_bytes"]) / files, 3),
                          "seconds": round(r["seconds"], 1)}))


if __name__ == "__main__":
    main()
