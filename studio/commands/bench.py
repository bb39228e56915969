"""`alaya-studio bench [NAME ...] [--all]`: run the benchmarks of the `bench` package (the checkout's bench/).

Each benchmark is a module (`python -m bench.NAME`) that prints a table and writes JSON with `--json`; this
command runs the chosen ones in turn, each in its own process, and collects their JSON into one folder.
"""

from __future__ import annotations

import pkgutil
import subprocess
import sys
from pathlib import Path

from alaya_errors import UserError

# The package beside `studio` (the checkout's bench/, or the installed copy); `-m bench.NAME` runs from its parent.
BENCH_DIR = Path(__file__).resolve().parents[2] / "bench"
NOT_BENCHMARKS = {"harness"}    # modules of the package that the benchmarks share
# The CPU set that `--all` runs, in a few minutes on a 2-core machine.
CPU_SET = ("engine_bench", "reference_bench", "formats_bench", "offline_bench", "flash_cpu", "renderer_bench",
           "rollout_bench", "webrtc_bench", "browser_latency_bench")


def available() -> list[str]:
    if not (BENCH_DIR / "__init__.py").is_file():
        return []
    return sorted(m.name for m in pkgutil.iter_modules([str(BENCH_DIR)]) if m.name not in NOT_BENCHMARKS)


def register(sub) -> None:
    p = sub.add_parser("bench", help="run benchmarks from bench/ (results as tables and JSON)")
    p.add_argument("names", nargs="*", metavar="NAME", help="benchmark script names (see --list)")
    p.add_argument("--all", action="store_true", help=f"run the CPU set: {', '.join(CPU_SET)}")
    p.add_argument("--list", action="store_true", help="list the benchmarks")
    p.add_argument("--json-dir", default="bench-results", help="folder for the JSON results")
    p.set_defaults(func=run)


def run(args) -> int:
    names = available()
    if not names:
        raise UserError(f"no benchmarks found in {BENCH_DIR}; run from a source checkout", "bench")
    if args.list:
        print("\n".join(names))
        return 0
    chosen = list(CPU_SET) if args.all else args.names
    if not chosen:
        raise UserError("name benchmarks to run or pass --all (see --list)", "bench")
    unknown = [n for n in chosen if n not in names]
    if unknown:
        raise UserError(f"unknown benchmark(s) {', '.join(unknown)}; known: {', '.join(names)}", "bench")
    out = Path(args.json_dir)
    out.mkdir(parents=True, exist_ok=True)
    failed = []
    for name in chosen:
        print(f"== {name}", flush=True)
        rc = subprocess.call([sys.executable, "-m", f"bench.{name}", "--json", str(out.resolve() / f"{name}.json")],
                             cwd=BENCH_DIR.parent)
        if rc:
            failed.append(name)
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0
