"""Shared fixtures. Tests use real files under tmp_path and tiny real models, never mocks."""

from __future__ import annotations

import os

import numpy as np
import pytest
from hypothesis import settings

# The same examples on every run (a red suite means a change broke something, not that a new example was drawn);
# FUZZ_SCALE=N or HYPOTHESIS_RANDOM=1 hunt with fresh random examples instead (see tests/helpers/fuzz.py).
settings.register_profile("suite", derandomize=True, database=None)
settings.register_profile("hunt", derandomize=False, database=None)
settings.load_profile("hunt" if os.environ.get("FUZZ_SCALE") or os.environ.get("HYPOTHESIS_RANDOM") else "suite")

# A native crash prints every thread's Python stack even after a library took over the fatal signals.
pytest_plugins = ["tests.helpers.crash_report"]

# Headless GL on CPU: Mesa llvmpipe through EGL.
os.environ.setdefault("EGL_PLATFORM", "surfaceless")


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(1234)
