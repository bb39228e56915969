"""The live layer's shape, checked on the source so that a change that undoes it fails here (issue 43: structure,
who calls whom, not line counts):
- one way in: every front door hands a live session its commands through `SessionControl` (studio/server/
  control.py), which is the only code that queues work for the session's worker;
- nothing outside the session reaches into its parts (timeline, rollout's writers, worker, takes, outbox);
- no class in studio/server holds more than 15 attributes, and the worker at most 12;
- one function reads aiortc's privates.
(No bench edits `sys.path`: tests/test_bench_harness.py; import cycles: tests/test_layering.py.)"""

from __future__ import annotations

import ast
from pathlib import Path

import aiortc

ROOT = Path(__file__).resolve().parents[1]
SERVER = ROOT / "studio" / "server"
SERVING = ("webrtc", "studio", "gbuffer", "renderer", "prompt_presets", "cluster")
MAX_ATTRIBUTES, MAX_WORKER_ATTRIBUTES = 15, 12
# the front doors, and the one call each makes into a session
FRONT_DOORS = {"session.py": "receive",          # the owner's data channel (through the control's receive)
               "osc.py": "submit", "grpc_service.py": "ask", "engine_channel.py": "ask", "routes.py": "ask"}
# the session's own modules: they hold its parts
INSIDE = {"session.py", "control.py", "commands.py", "worker.py", "handover.py", "chunk_stage.py"}
PARTS = {"timeline", "worker", "handover", "commands", "playback"}


def server_modules():
    return sorted(SERVER.glob("*.py"))


def calls(path: Path) -> list[tuple[str, str]]:
    """(receiver's last name, method) for every `a.b.method(...)` call in `path`."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            receiver = node.func.value
            name = receiver.attr if isinstance(receiver, ast.Attribute) else getattr(receiver, "id", "")
            found.append((name, node.func.attr))
    return found


def test_only_the_control_queues_work_for_a_sessions_worker():
    queuing = {p.name for p in server_modules() if ("worker", "submit") in calls(p)}
    assert queuing == {"control.py"}, queuing


def uses(path: Path) -> set[tuple[str, str]]:
    """(receiver's last name, attribute) for every `a.b.attr` read in `path`, called or handed on."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load):
            receiver = node.value
            found.add((receiver.attr if isinstance(receiver, ast.Attribute) else getattr(receiver, "id", ""),
                       node.attr))
    return found


def test_every_front_door_enters_through_the_sessions_control():
    for name, method in FRONT_DOORS.items():
        assert ("control", method) in uses(SERVER / name), f"{name} does not use control.{method}"


def test_nothing_outside_the_session_reaches_into_its_parts():
    reaching = {}
    for path in server_modules():
        if path.name in INSIDE:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if (isinstance(node, ast.Attribute) and node.attr in PARTS
                    and not (isinstance(node.value, ast.Name) and node.value.id == "self")):
                reaching.setdefault(path.name, set()).add(node.attr)
    assert not reaching, reaching


def attributes(cls: ast.ClassDef) -> set[str]:
    """The names a class's methods assign on `self`: the state it keeps (a settings record's declared fields are
    configuration, not state, and do not count)."""
    names = set()
    for node in ast.walk(cls):
        if (isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store)
                and isinstance(node.value, ast.Name) and node.value.id == "self"):
            names.add(node.attr)
    return names


def test_no_server_class_holds_more_than_15_attributes_and_the_worker_12():
    sizes = {}
    for path in server_modules():
        for cls in (n for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, ast.ClassDef)):
            sizes[f"{path.name}:{cls.name}"] = len(attributes(cls))
    assert sizes["worker.py:SessionWorker"] <= MAX_WORKER_ATTRIBUTES, sizes["worker.py:SessionWorker"]
    crowded = {name: n for name, n in sizes.items() if n > MAX_ATTRIBUTES}
    assert not crowded, crowded


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
