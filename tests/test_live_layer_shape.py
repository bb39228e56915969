"""Issue 25's done-when, checked on the source so a later change that undoes them fails here: studio/server has no
file over 320 lines, `LiveSession`'s own body fits on two screens, and one function reads aiortc's privates. (No
bench edits `sys.path`: tests/test_bench_harness.py; renderer/ has no import cycle: tests/test_layering.py.)"""

from __future__ import annotations

import ast
from pathlib import Path

import aiortc

ROOT = Path(__file__).resolve().parents[1]
MAX_SERVER_FILE = 320            # lines
SCREEN = 70                      # lines of code on one screen (a 1080p editor at the project's 120 columns)
SERVING = ("webrtc", "studio", "gbuffer", "renderer", "prompt_presets", "cluster")


def test_no_studio_server_file_is_over_320_lines():
    long = {p.name: n for p in (ROOT / "studio" / "server").glob("*.py")
            if (n := len(p.read_text().splitlines())) > MAX_SERVER_FILE}
    assert not long, long


def test_the_live_sessions_own_body_fits_on_two_screens():
    tree = ast.parse((ROOT / "studio" / "server" / "session.py").read_text())
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "LiveSession")
    assert cls.end_lineno - cls.lineno + 1 <= 2 * SCREEN


def aiortc_private_names() -> set[str]:
    """Every `_name` aiortc defines on its own objects (`self._name = ...`, private methods), name-mangled
    `__name`s spelled as outside code must write them (`_Class__name`)."""
    names = set()
    for path in Path(aiortc.__file__).parent.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef):
                for inner in ast.walk(node):
                    name = inner.attr if isinstance(inner, ast.Attribute) else \
                        inner.name if isinstance(inner, (ast.FunctionDef, ast.AsyncFunctionDef)) else None
                    if name and name.startswith("__") and not name.endswith("__"):
                        names.add(f"_{node.name.lstrip('_')}{name}")
                    elif name and name.startswith("_") and not name.startswith("__"):
                        names.add(name)
    return names


def private_reads(path: Path, private: set[str]) -> list[tuple[str, str]]:
    """(function, attribute) for each read of an aiortc private on an object that is not the reader's own: `self.`,
    `cls.` and `super().` are a subclass's own (webrtc/encoders.py overrides the encoders' `_encode_frame`, checked
    by tests/test_aiortc_internals.py); a write (`install_encoder` fills the sender's encoder slot) reads nothing."""
    found = []

    def own(value) -> bool:
        return (isinstance(value, ast.Name) and value.id in ("self", "cls")) or (
            isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id == "super")

    def visit(node, function: str) -> None:
        for child in ast.iter_child_nodes(node):
            inside = child.name if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) else function
            if (isinstance(child, ast.Attribute) and isinstance(child.ctx, ast.Load) and child.attr in private
                    and not own(child.value)):
                found.append((function, child.attr))
            visit(child, inside)
    visit(ast.parse(path.read_text()), "<module>")
    return found


def test_one_function_reads_aiortc_privates():
    private = aiortc_private_names()
    assert {"_codecs", "_RTCRtpSender__encoder"} <= private          # the finder sees the ones we know of
    reads = {}
    for package in SERVING:
        for path in (ROOT / package).rglob("*.py"):
            for function, attr in private_reads(path, private):
                reads.setdefault(f"{path.relative_to(ROOT)}:{function}", set()).add(attr)
    assert reads == {"webrtc/answer.py:answer_sendonly": {"_codecs"}}, reads


def test_the_private_read_finder_sees_a_read_and_ignores_own_attributes(tmp_path):
    code = tmp_path / "m.py"
    code.write_text("def f(t):\n    return t._codecs\n\nclass A:\n    def g(self):\n        return self._codecs\n"
                    "\ndef h(s):\n    s._RTCRtpSender__encoder = 1\n"
                    "\nclass B:\n    def _codecs(self):\n        return super()._codecs()\n")
    assert private_reads(code, {"_codecs", "_RTCRtpSender__encoder"}) == [("f", "_codecs")]
