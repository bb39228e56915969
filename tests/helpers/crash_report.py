"""Keep Python's crash report armed for the whole suite (a pytest plugin, loaded by tests/conftest.py).

pytest arms `faulthandler` once, at start-up, so a native crash (SIGSEGV, SIGABRT, ...) prints every thread's
Python stack. A library that installs its own fatal-signal handlers takes that over for the rest of the process:
in-process Ray (tests/test_cluster.py) installs absl's, which print a C++ stack to whatever fd 2 is at the time,
and during a test that is pytest's capture file, lost with the process. A crash in a later test then left only
"Aborted" and a cut-off progress line (the repeat series at 8061ba6, run 7). So faulthandler is armed again
before every test, writing to a copy of the real stderr taken at start-up. `enable` on an enabled faulthandler
only changes its file, so it is disabled first: the other library's handler is dropped (its report would have gone
to the capture file anyway).
"""

from __future__ import annotations

import faulthandler
import os
import sys

import pytest

_stderr_copy: int | None = None


def pytest_configure(config: pytest.Config) -> None:
    global _stderr_copy
    _stderr_copy = os.dup(sys.stderr.fileno())


def pytest_unconfigure(config: pytest.Config) -> None:
    global _stderr_copy
    if _stderr_copy is not None:
        os.close(_stderr_copy)
        _stderr_copy = None


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    if _stderr_copy is not None:
        faulthandler.disable()
        faulthandler.enable(file=_stderr_copy, all_threads=True)
