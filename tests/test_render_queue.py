"""Render jobs wait their turn in a small bounded queue (issue 45, finding 12): a second visitor's render waits
(and knows its place) instead of being refused, the queue is bounded in all and per visitor, and a job that ends
lets the next one start. A real renderer writes real MP4s; the first job's source waits on a gate so the queue is
seen while it renders, whatever this machine's speed. The page's side: tests/test_ui_text_and_renders.py."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from gbuffer.formats.npy import NpyWindowsSource
from renderer.reference import ReferenceRenderer
from studio.server.access import Visitor
from studio.server.planner import SessionPlan
from studio.ui.jobs import MAX_WAITING, QueueFull, RenderJobs
from timeline.schedule import Schedule

from helpers.browser import wait_until


class GatedSource(NpyWindowsSource):
    """A real .npy sequence whose frames after the first wait for `gate`: its job holds the renderer until told."""

    def __init__(self, path, gate: threading.Event):
        super().__init__([path])
        self.gate = gate

    def read(self, index: int):
        if index > 0 and not self.gate.wait(60):
            raise TimeoutError("the test never opened the gate")
        return super().read(index)


@pytest.fixture
def clip(tmp_path):
    path = tmp_path / "clip.npy"
    np.save(path, np.random.default_rng(3).integers(0, 256, (4, 5, 32, 48, 3), dtype=np.uint8))
    return path


@pytest.fixture
def jobs(tmp_path):
    return RenderJobs(tmp_path / "renders")


PLAN = SessionPlan("clip", "reference", 48, 32, 30.0, 0, Schedule.single("polar"))
RENDERER = ReferenceRenderer("cpu")


def visitor(n: int) -> Visitor:
    return Visitor(key=f"owner-key-of-visitor-{n}")


def test_a_second_visitors_render_waits_its_turn_then_renders(jobs, clip):
    gate = threading.Event()
    first = jobs.start(4, GatedSource(clip, gate), RENDERER, PLAN, owner=visitor(1))
    second = jobs.start(4, NpyWindowsSource([clip]), RENDERER, PLAN, owner=visitor(2))
    assert first.state == "running" and jobs.position(first) is None
    assert second.state == "waiting" and jobs.position(second) == 1     # it renders next
    gate.set()
    wait_until(lambda: second.state == "done", 60, lambda: f"the second job is {second.state}: {second.error}")
    assert first.state == "done" and first.path.stat().st_size > 0 and second.path.stat().st_size > 0
    assert jobs.position(second) is None


def test_the_queue_is_bounded_in_all_and_per_visitor(jobs, clip):
    gate = threading.Event()
    try:
        jobs.start(4, GatedSource(clip, gate), RENDERER, PLAN, owner=visitor(0))
        waiting = [jobs.start(4, NpyWindowsSource([clip]), RENDERER, PLAN, owner=visitor(n))
                   for n in range(1, MAX_WAITING + 1)]
        assert [jobs.position(j) for j in waiting] == list(range(1, MAX_WAITING + 1))
        with pytest.raises(QueueFull, match=rf"^render: the render queue is full \({MAX_WAITING} renders are "
                                            r"waiting their turn\): try again when one has finished$") as full:
            jobs.start(4, NpyWindowsSource([clip]), RENDERER, PLAN, owner=visitor(99))
        assert full.value.status == 429
        with pytest.raises(QueueFull, match="you have a render waiting or rendering already"):
            jobs.start(4, NpyWindowsSource([clip]), RENDERER, PLAN, owner=waiting[0].owner)
        assert len(jobs.jobs) == 1 + MAX_WAITING                          # nothing refused was queued
    finally:
        gate.set()
    wait_until(lambda: all(j.state == "done" for j in jobs.jobs.values()), 120,
               lambda: {j.id: (j.state, j.error) for j in jobs.jobs.values()})
