"""The studio page as a visitor meets it (issue 15), in Debian's Chromium against a running studio: what is
drawn is what renders, messages do not go stale, hotkeys, pause, render feedback, the prompt resolver, loops and
source changes, the timeline's clutter and playhead. One page for the module; tests that need a fresh page or
server open their own."""

from __future__ import annotations

import numpy as np
import pytest

from helpers.browser import (CHROMIUM, HAVE_CHROMIUM, chromium, open_studio, server_schedule, status,
                             studio_with_ui, wait_until)
from studio.schedule import Schedule

pytestmark = pytest.mark.skipif(not HAVE_CHROMIUM, reason=f"needs Debian's Chromium at {CHROMIUM}")


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with studio_with_ui(tmp_path_factory.mktemp("ui-cache"), max_sessions=4) as srv:
        yield srv


@pytest.fixture(scope="module")
def browser():
    with chromium() as browser:
        yield browser


@pytest.fixture(scope="module")
def page(browser, server):
    page = open_studio(browser, server)
    yield page
    page.close()


def message(page) -> str:
    return page.locator("#alaya-message").inner_text()


def weight_of(conditioning, preset: str) -> float:
    total = sum(p.weight for p in conditioning.prompts)
    return sum(p.weight for p in conditioning.prompts if p.preset == preset) / total


def test_the_drawn_ramp_is_the_schedules_own_curve(page):
    doc = {"version": 1, "fps": 30, "length": 160, "segments": [
        {"start": 0, "prompts": [{"preset": "cyberpunk"}]},
        {"start": 64, "prompts": [{"preset": "volcano"}],
         "transition": {"kind": "linear", "frames": 16, "easing": "ease_in_out"}}]}
    page.evaluate("doc => window.alayaStudio.timeline.set(doc, {notify: false})", doc)
    points = page.evaluate("""() => document.querySelector(".tl-block[data-index='1'] polyline")
        .getAttribute("points").trim().split(/\\s+/).map((p) => p.split(",").map(Number))""")
    schedule = Schedule.from_json(doc)
    width = points[-1][0]
    for k in (2, 4, 8, 12, 14, 16):           # progress k/16 is frame 64 + k - 1 (docs/schedule.md)
        x, y = points[k]
        assert x == pytest.approx(width * k / 16)
        assert 1 - y / 60 == pytest.approx(weight_of(schedule.conditioning_at(64 + k - 1), "volcano"), abs=1e-3)
