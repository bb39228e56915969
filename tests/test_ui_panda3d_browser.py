"""Panda3D as the page's source (issue 45, finding 11), in Debian's Chromium against a running studio, with
`alaya-studio engine panda3d` feeding it as a real process: the inspector shows the engine's meta, a quick R tap
puts the car back, and a car reversed into the rocks stays in view and is put back when it is stuck.

The car's paint is the scene's only metallic surface, so the car's share of a frame is the count of metallic
pixels in the G-buffer the engine sent: how much of the car the chase camera shows, measured from the picture."""

from __future__ import annotations

import math
import subprocess
import sys

import httpx
import numpy as np
import pytest

from helpers.browser import (CHROMIUM, HAVE_CHROMIUM, SIZE, browser, frames_decoded, message,  # noqa: F401
                             page_auth, record_acks, server, wait_until)

pytest.importorskip("panda3d")
pytestmark = [pytest.mark.gl,
              pytest.mark.skipif(not HAVE_CHROMIUM, reason=f"needs Debian's Chromium at {CHROMIUM}")]

START = (-15.0, 35.0)               # gbuffer/panda3d/scene.py START (x, y): where R puts the car
PAINT_METALLIC = 150                # the paint's metallic is 0.8 (204 encoded); nothing else in the scene is


@pytest.fixture(scope="module")
def engine(server):
    proc = subprocess.Popen([sys.executable, "-m", "studio.cli", "engine", "panda3d", "--connect",
                             f"{server.ws_url}/api/engine/feed", "--size", SIZE, "--fps", "30"],
                            stderr=subprocess.PIPE, text=True)
    try:
        wait_until(lambda: "panda3d" in server.app.state.feeds.names() or proc.poll() is not None, 90,
                   "the panda3d engine to connect")
        assert proc.poll() is None, proc.communicate()[1]
        yield proc
    finally:
        proc.kill()
        proc.wait(30)


@pytest.fixture(scope="module")
def page(browser, server, engine):
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.goto(f"{server.url}/?size={SIZE}&source=feed:panda3d")
    wait_until(lambda: frames_decoded(page) > 0, 90, lambda: f"the video never played: {message(page)!r}")
    yield page
    page.close()


def inspected(server, page) -> dict:
    sid = page.evaluate("window.alayaStudio.sessionId")
    return httpx.get(f"{server.url}/api/ui/sessions/{sid}/inspector", headers=page_auth(page), timeout=30).json()


def from_start(meta: dict) -> float:
    return math.hypot(meta["position"][0] - START[0], meta["position"][1] - START[1])


def car_pixels(frame) -> int:
    from gbuffer.frame import CHANNEL_INDEX

    return int((frame.data[CHANNEL_INDEX["metallic"]][..., 0] > PAINT_METALLIC).sum())


def back_at_the_start(server, page, key_down_s: float = 1.0) -> dict:
    """Hold R (the way that worked before taps did), then wait for the car to rest at the start."""
    page.click("#alaya-video")                                           # drive
    page.keyboard.down("r")
    page.wait_for_timeout(key_down_s * 1000)
    page.keyboard.up("r")
    return wait_until(lambda: (lambda m: m if "position" in m and from_start(m) < 1.5 and abs(m["speed"]) < 0.3
                               else None)(inspected(server, page)["meta"]), 30,
                      lambda: f"the car did not come back to the start: {inspected(server, page)['meta']}")


def test_the_inspector_shows_the_engines_meta(page):
    page.locator("#alaya-inspect").check()
    info = page.locator("#alaya-inspect-info")
    wait_until(lambda: "panda3d" in info.inner_text() and " m/s" in info.inner_text(), 30,
               lambda: f"the inspector says {info.inner_text()!r}")
    line = info.inner_text()
    assert "at " in line and ("cruising" in line or "you drive" in line), line
    assert "[[" not in line, line                                        # no camera matrices in the line


def test_a_quick_r_tap_puts_the_car_back(server, page):
    back_at_the_start(server, page)
    page.keyboard.down("ArrowUp")
    try:
        wait_until(lambda: from_start(inspected(server, page)["meta"]) > 12, 30, "the car to drive 12 m")
    finally:
        page.keyboard.up("ArrowUp")
    before = inspected(server, page)["meta"]
    page.keyboard.press("r")                                             # down and up at once: a tap
    back = wait_until(lambda: (lambda m: m if from_start(m) < 1.5 else None)(inspected(server, page)["meta"]), 10,
                      lambda: f"a tap of R left the car at {inspected(server, page)['meta']['position']}")
    assert back["stuck_resets"] == before["stuck_resets"], "the scene put it back, not the tap"


def test_a_car_reversed_into_the_rocks_stays_in_view_and_is_put_back(server, page):
    """Reversing from the start backs the car into the rocks south of it: the chase camera, behind the car, meets
    them first. The camera comes in along its arm instead of entering them, and the wedged car goes back."""
    rest = back_at_the_start(server, page)
    feed = server.app.state.feeds.get("panda3d")
    at_rest = feed.wait_frame(0, 10)
    assert at_rest is not None
    seen, meta = [], rest
    page.keyboard.down("ArrowDown")
    try:
        after = feed.frames
        while meta["stuck_resets"] == rest["stuck_resets"] and len(seen) < 30 * 30:
            frame = feed.wait_frame(after, 10)
            assert frame is not None, "the engine stopped sending"
            after = feed.frames
            seen.append((frame.meta.get("position"), car_pixels(frame)))
            if len(seen) % 15 == 0:
                meta = inspected(server, page)["meta"]
    finally:
        page.keyboard.up("ArrowDown")
    assert meta["stuck_resets"] > rest["stuck_resets"], f"still wedged after {len(seen)} frames: {meta}"
    reversed_to = min(p[1] for p, _ in seen if p)
    assert reversed_to < START[1] - 8, f"the car only reversed to y {reversed_to:.1f}"
    shown = np.array([n for _, n in seen])
    worst = int(shown.argmin())
    assert shown.min() >= 0.4 * car_pixels(at_rest), \
        f"frame {worst} of the drive shows {shown.min()} car pixels (at rest {car_pixels(at_rest)}), " \
        f"at {seen[worst][0]}"


def test_letting_go_of_the_car_says_nothing_wrong(page):
    """Esc hands a live source back to whoever drives it when nobody does; an engine on the feed has no autopilot
    of the studio's, and letting go is not an error."""
    record_acks(page)
    page.click("#alaya-video")
    page.keyboard.press("Escape")
    ack = wait_until(lambda: next((a for a in page.evaluate("window.alayaStudio.acks")
                                   if a["request"] == "autopilot"), None), 20,
                     lambda: f"no answer to letting go; the page says {message(page)!r}")
    assert ack["on"] is False and "autopilot" not in message(page), (ack, message(page))
    assert not page.evaluate("window.alayaStudio.driving")
