"""The reference renderer's look, pinned: every preset (and one mid-transition blend) rendered on the synthetic
G-buffer must stay within a small tolerance of the golden image in tests/golden/reference/, on both backends:
the OpenGL one (renderer/reference/gl.py, the default on a CPU) and torch. A speed-up that changes the math has
to keep these.

After an intended change of look, regenerate and review the pictures:
    ALAYA_UPDATE_GOLDEN=1 .venv/bin/python -m pytest tests/test_reference_golden.py -k torch
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from prompt_presets import Conditioning, conditioning_for, preset_names, resolve_prompt
from renderer.reference import ReferenceRenderer
from renderer.reference.synthetic import synthetic_gbuffer

GOLDEN = Path(__file__).parent / "golden" / "reference"
W, H = 160, 96
UPDATE = os.environ.get("ALAYA_UPDATE_GOLDEN") == "1"
MEAN_TOLERANCE = 0.5          # mean absolute difference, in 8-bit levels (float rounding across CPUs: ~0.01)
PIXEL_TOLERANCE = 6           # what 99.9 % of the channel values must stay within


def looks() -> dict[str, Conditioning]:
    out = {name: conditioning_for(name) for name in preset_names()}
    out["blend_volcano_polar"] = Conditioning((resolve_prompt("volcano", 0.6), resolve_prompt("polar", 0.4)))
    return out


@pytest.fixture(scope="module", params=["torch", pytest.param("gl", marks=pytest.mark.gl)])
def rendered(request) -> dict[str, np.ndarray]:
    session = ReferenceRenderer("cpu", backend=request.param).open_session(W, H)
    frame = synthetic_gbuffer(W, H, t=0.5)
    return {name: session.render([frame], [cond]).rgb[0] for name, cond in looks().items()}


@pytest.mark.parametrize("name", list(looks()))
def test_each_look_matches_its_golden_image(rendered, name, request):
    path = GOLDEN / f"{name}.png"
    if UPDATE and "torch" in request.node.callspec.id:   # the torch path draws the golden set
        GOLDEN.mkdir(parents=True, exist_ok=True)
        Image.fromarray(rendered[name]).save(path, optimize=True)
    assert path.is_file(), f"no golden image for {name}: regenerate with ALAYA_UPDATE_GOLDEN=1"
    golden = np.asarray(Image.open(path).convert("RGB")).astype(np.int16)
    diff = np.abs(rendered[name].astype(np.int16) - golden)
    assert diff.mean() <= MEAN_TOLERANCE and np.percentile(diff, 99.9) <= PIXEL_TOLERANCE, \
        f"{name}: mean {diff.mean():.3f}, p99.9 {np.percentile(diff, 99.9):.1f}, max {diff.max()}"


def test_the_golden_set_covers_every_preset():
    assert sorted(p.stem for p in GOLDEN.glob("*.png")) == sorted(looks())
