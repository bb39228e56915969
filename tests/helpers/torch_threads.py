"""Test fixtures for CPU-bound torch work and random G-buffer frames."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from gbuffer.frame import GBufferFrame


@pytest.fixture(autouse=True, scope="module")
def one_torch_thread():
    """On a shared 2-core machine torch's default thread pool oversubscribes (measured 40x slower). Import by
    name into a test module to apply it there."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def random_frames(n: int, start: int = 0, seed: int = 0, width: int = 64, height: int = 32) -> list[GBufferFrame]:
    """n consecutive G-buffer frames of uniform noise (indices and timestamps from `start`)."""
    rng = np.random.default_rng(seed)
    return [GBufferFrame(start + i, (start + i) / 30, rng.integers(0, 256, (5, height, width, 3), dtype=np.uint8))
            for i in range(n)]
