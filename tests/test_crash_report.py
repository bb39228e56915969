"""A native crash anywhere in the suite prints every thread's Python stack (tests/helpers/crash_report.py), even
after a library in the process took over the fatal signals as in-process Ray does."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CRASHING_TESTS = '''
import ctypes
import os
import signal


def test_a_library_takes_over_the_fatal_signals():
    libc = ctypes.CDLL(None)
    libc.signal.restype = ctypes.c_void_p
    libc.signal.argtypes = [ctypes.c_int, ctypes.c_void_p]
    libc.signal(signal.SIGABRT, None)          # SIG_DFL behind Python's back, as absl's installer replaces ours


def test_a_later_test_crashes():
    os.abort()
'''


def run_pytest(path: Path, *plugins: str) -> subprocess.CompletedProcess:
    args = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--rootdir", str(path.parent)]
    for plugin in plugins:
        args += ["-p", plugin]
    return subprocess.run(args + [str(path)], cwd=ROOT, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})


def test_a_native_crash_after_a_library_took_the_fatal_signals_still_prints_the_python_stacks(tmp_path):
    tests = tmp_path / "test_crash.py"
    tests.write_text(CRASHING_TESTS)
    bare = run_pytest(tests)
    assert bare.returncode == -signal.SIGABRT
    assert "Fatal Python error" not in bare.stderr          # pytest's own arming alone: the crash says nothing
    armed = run_pytest(tests, "tests.helpers.crash_report")
    assert armed.returncode == -signal.SIGABRT
    assert "Fatal Python error: Aborted" in armed.stderr and "in test_a_later_test_crashes" in armed.stderr
