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
    "training": {"studio"},                          # beside the renderer: schedules/rollout/MP4 come from below
    # timeline.rollout still types against renderer.base (RenderSession, RenderResult): renderer not yet forbidden
    "timeline": {"studio", "webrtc", "training", "cluster"},
    "media": {"renderer", "webrtc", "studio", "training", "cluster", "timeline"},
}
PACKAGES = ("gbuffer", "prompt_presets", "renderer", "webrtc", "cluster", "training", "timeline", "media", "studio",
            "bench")
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


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_modules(path: Path, known: set[str]) -> set[str]:
    """The modules of `known` that `path` imports, at any depth (function-local imports count: they hide a cycle,
    they do not remove it). `from P import m` names module P.m where that is one, else P itself."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found |= {f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in known else node.module
                      for a in node.names}
    return found & known


def import_cycle(package: str) -> list[str] | None:
    """One cycle among `package`'s modules (as a path a → b → … → a), or None."""
    paths = {module_name(p): p for p in sorted((ROOT / package).rglob("*.py"))}
    graph = {m: sorted(imported_modules(p, set(paths)) - {m}) for m, p in paths.items()}
    done: set[str] = set()

    def visit(module: str, trail: list[str]) -> list[str] | None:
        if module in trail:
            return trail[trail.index(module):] + [module]
        if module in done:
            return None
        for target in graph[module]:
            if (cycle := visit(target, trail + [module])) is not None:
                return cycle
        done.add(module)
        return None

    return next((c for m in graph if (c := visit(m, [])) is not None), None)


def test_the_cycle_finder_sees_a_function_local_cycle(tmp_path, monkeypatch):
    pkg = tmp_path / "loop"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from loop.b import f\n")
    (pkg / "b.py").write_text("def f():\n    from loop import a\n")
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    assert import_cycle("loop") == ["loop.a", "loop.b", "loop.a"]


@pytest.mark.parametrize("package", PACKAGES)
def test_no_import_cycle_among_a_packages_modules(package):
    """Every import counts, TYPE_CHECKING and function-local ones included: a cycle hidden behind one is still a
    cycle a reader has to hold in mind (renderer's backends import the protocol, renderer.base, never the table
    of backends that imports them; the live session's control imports its commands, never the reverse)."""
    assert import_cycle(package) is None



def reads_app_state(node: ast.AST) -> bool:
    return any(isinstance(n, ast.Attribute) and n.attr == "state" and isinstance(n.value, ast.Attribute)
               and n.value.attr == "app" for n in ast.walk(node))


def test_no_route_reaches_into_the_app_state():
    """A route names what it needs (`session: SessionDep`, ...) and a provider (studio.server.deps, the UI's
    `ui_state`) reads `app.state` for it."""
    routes = [(path, fn) for folder in ("studio/server", "studio/ui") for path in sorted((ROOT / folder).rglob("*.py"))
              for fn in ast.walk(ast.parse(path.read_text()))
              if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) and any(
                  isinstance(d, ast.Call) and isinstance(d.func, ast.Attribute) and d.func.attr in
                  ("get", "post", "put", "patch", "delete", "websocket") for d in fn.decorator_list)]
    assert len(routes) > 30
    assert [f"{path.relative_to(ROOT)}:{fn.lineno} {fn.name}" for path, fn in routes if reads_app_state(fn)] == []


def test_no_import_cycle_between_packages():
    """The top-level packages form a DAG: every import counts, TYPE_CHECKING and function-local ones included."""
    graph = {p: sorted({name for path in (ROOT / p).rglob("*.py") for name, _ in imported_packages(path)}
                       & set(PACKAGES) - {p}) for p in PACKAGES}
    done: set[str] = set()

    def visit(package: str, trail: list[str]) -> list[str] | None:
        if package in trail:
            return trail[trail.index(package):] + [package]
        if package in done:
            return None
        for target in graph[package]:
            if (cycle := visit(target, trail + [package])) is not None:
                return cycle
        done.add(package)
        return None

    assert next((c for p in PACKAGES if (c := visit(p, [])) is not None), None) is None
