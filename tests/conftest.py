"""Shared fixtures. Tests use real files under tmp_path and tiny real models, never mocks."""

from __future__ import annotations

import os

import numpy as np
import pytest

# Headless GL on CPU: Mesa llvmpipe through EGL.
os.environ.setdefault("EGL_PLATFORM", "surfaceless")


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(1234)
