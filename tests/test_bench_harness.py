"""bench/ is a package of modules run as `python -m bench.NAME`; `alaya-studio bench` runs them by name."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

from studio.cli import main as cli

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "bench"


def test_no_bench_script_edits_sys_path():
    edits = [f"{path.name}:{node.lineno}" for path in sorted(BENCH.glob("*.py"))
             for node in ast.walk(ast.parse(path.read_text()))
             if isinstance(node, ast.Attribute) and node.attr == "path"
             and isinstance(node.value, ast.Name) and node.value.id == "sys"]
    assert edits == []


def test_the_bench_command_lists_the_benchmarks_not_their_harness(capsys):
    assert cli(["bench", "--list"]) == 0
    names = capsys.readouterr().out.split()
    assert {"cold_start_bench", "webrtc_bench", "renderer_bench"} <= set(names)
    assert "harness" not in names and "__init__" not in names


def test_an_unknown_benchmark_is_one_line_and_exit_2(capsys):
    assert cli(["bench", "no_such_bench"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: bench: unknown benchmark(s) no_such_bench") and "\n" not in err


def test_a_benchmark_runs_as_a_module_and_writes_its_json(tmp_path):
    out = tmp_path / "formats.json"
    run = subprocess.run([sys.executable, "-m", "bench.formats_bench", "--frames", "3", "--sizes", "48x32",
                          "--json", str(out)], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    rows = json.loads(out.read_text())
    assert [r["format"] for r in rows] == [".gbuf.zip", ".npy windows"]
    assert all(r["size"] == "48x32" and r["frames"] == 3 for r in rows)
    assert "random read" in run.stdout            # the table's header


def test_the_timed_chunk_loop_times_every_chunk_after_the_warm_up():
    from bench.harness import synthetic_frames, timed_chunks
    from prompt_presets import conditioning_for
    from renderer import create_renderer

    frames = synthetic_frames(12, 32, 16)
    asked = []
    with create_renderer("reference").open_session(32, 16) as session:
        size = session.chunk_size
        chunks, _ = timed_chunks(session, frames, lambda k: asked.append(k) or conditioning_for("volcano"), 2)
    count = -(-len(frames) // size)
    assert asked == list(range(count))                          # each chunk asked for its conditioning once
    assert sum(c.frames for c in chunks) == len(frames) - 2 * size   # all but the two warm-up chunks timed
    assert all(0 < c.first_out_seconds <= c.seconds for c in chunks)


def test_the_switch_benchs_bad_flags_are_one_line_and_exit_2_before_any_studio_starts():
    for flags, says in ((["--osc-ahead", "-5"], "error: --osc-ahead takes 0..10000 ms"),
                        (["--osc-ahead", "200", "--bpm", "120"], "error: --osc-ahead takes 0..10000 ms"),
                        (["--osc-ahead", "200", "--browser"], "error: --osc-ahead takes 0..10000 ms"),
                        (["--bpm", "900"], "error: --bpm 900 is not within 20..300"),
                        (["--transition", "-1"], "error: --transition -1 is not within 0..")):
        run = subprocess.run([sys.executable, "-m", "bench.switch_bench", *flags], cwd=ROOT, capture_output=True,
                             text=True, timeout=60)
        assert run.returncode == 2 and run.stdout == "", flags
        assert run.stderr.startswith(says) and run.stderr.count("\n") == 1, (flags, run.stderr)
