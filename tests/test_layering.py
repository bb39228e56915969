"""Imports flow one way (DESIGN.md): gbuffer and prompt_presets know nothing of renderer/webrtc/studio, renderer
nothing of webrtc/studio; and the default studio does not load the optional heavy parts."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FORBIDDEN = {
    "gbuffer": {"renderer", "webrtc", "studio", "training"},
    "prompt_presets": {"gbuffer", "renderer", "webrtc", "studio", "training"},
    "renderer": {"webrtc", "studio", "training", "cluster"},
    "webrtc": {"studio", "training", "cluster"},
    "cluster": {"webrtc", "studio", "training"},     # render workers: renderer below, the studio above
}
OPTIONAL = ("ray", "cluster", "training", "peft", "diffusers", "transformers",
            "panda3d", "bpy", "grpc", "gbuffer.panda3d", "gbuffer.blender")   # the engines extra


def imported_packages(path: Path) -> set[tuple[str, int]]:
    tree = ast.parse(path.read_text(), str(path))
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {(a.name.split(".")[0], node.lineno) for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add((node.module.split(".")[0], node.lineno))
    return names


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_imports_flow_one_way(package):
    wrong = [f"{path.relative_to(ROOT)}:{line} imports {name}"
             for path in sorted((ROOT / package).rglob("*.py"))
             for name, line in imported_packages(path) if name in FORBIDDEN[package]]
    assert wrong == []


def test_the_default_studio_imports_no_optional_heavy_part():
    """`alaya-studio serve` with the reference renderer: the app, the UI and the CLI, nothing optional."""
    code = ("import sys, studio.cli, studio.server.app, studio.ui; "
            "from studio.server import Settings; from studio.server.app import create_app; create_app(Settings()); "
            f"print(','.join(m for m in {OPTIONAL!r} if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "", f"the default studio imported: {out.stdout.strip()}"
