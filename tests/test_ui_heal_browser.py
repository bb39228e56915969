"""The page heals (issue 45, finding 1), in Debian's Chromium: a real studio process is stopped under a page in
presenter mode and started again on the same port; the page says what is happening, drops its stale fps, asks
the studio with a growing pause, and once /api/health answers plays a new session with the same timeline within
5 s."""

from __future__ import annotations

import time
from types import SimpleNamespace

import httpx
import pytest

from bench.harness import free_port, start_server, stop
from helpers.browser import (CHROMIUM, HAVE_CHROMIUM, SIZE, chromium, frames_decoded, message, server_schedule,
                             settled, status, wait_until)

pytestmark = pytest.mark.skipif(not HAVE_CHROMIUM, reason=f"needs Debian's Chromium at {CHROMIUM}")

BACK_WITHIN_S = 5.0          # the bound: frames again within 5 s of the studio's health answering


def answers(url: str) -> bool:
    try:
        return httpx.get(f"{url}/api/health", timeout=1).status_code == 200
    except httpx.TransportError:
        return False


def overlay(page) -> dict:
    return page.evaluate("""() => Object.fromEntries(['prompt', 'fps'].map(
        (k) => [k, document.getElementById('alaya-ov-' + k).textContent]))""")


def count_pictures(page) -> None:
    """Count the pictures the video presents, across streams (its decoded-frame count starts again with each new
    stream, so it cannot tell when the new session's first picture showed)."""
    page.evaluate("""() => { const v = document.getElementById('alaya-video'); window.presented = 0;
        const tick = () => { window.presented += 1; v.requestVideoFrameCallback(tick); };
        v.requestVideoFrameCallback(tick); }""")


def presented(page) -> int:
    return page.evaluate("window.presented")


def record_said(page) -> None:
    """Keep every line the page says (the presenter's note shows each for a few seconds only)."""
    page.evaluate("""() => { const s = window.alayaStudio; s.said = []; const say = s.say;
        s.say = function (text, how) { this.said.push(text); return say.call(this, text, how); }; }""")


def said(page) -> list[str]:
    return page.evaluate("window.alayaStudio.said")


def note(page) -> str:
    return page.locator("#alaya-presenter-note").inner_text()


def test_the_page_comes_back_by_itself_after_a_studio_restart(tmp_path):
    port = free_port()
    flags = ["--takes-dir", str(tmp_path / "takes")]
    studio = SimpleNamespace(url=f"http://127.0.0.1:{port}", process=start_server(port, 2, "reference", flags))
    try:
        with chromium() as browser:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.goto(f"{studio.url}/?size={SIZE}")
            wait_until(lambda: frames_decoded(page) > 0, 120, "the video never played")
            page.click("#tl-eight")                                    # a timeline of the visitor's own
            wait_until(lambda: len(server_schedule(studio, page)["segments"]) == 8, 30,
                       lambda: f"Eight worlds did not apply: {message(page)!r}")
            settled(page)
            applied = server_schedule(studio, page)
            page.locator("#tl-info").click()                           # focus off the buttons: keys are hotkeys
            page.keyboard.press("p")
            assert "presenter" in page.locator("#alaya-studio").get_attribute("class")
            first = page.evaluate("window.alayaStudio.sessionId")
            wait_until(lambda: overlay(page)["fps"].endswith("fps"), 30, "the overlay shows no fps")

            record_said(page)
            count_pictures(page)
            wait_until(lambda: presented(page) > 0, 10, "the video presents no pictures")
            stop(studio.process)                                       # by its PID
            wait_until(lambda: any("reconnecting" in line for line in said(page)), 30,
                       lambda: f"the page does not say it reconnects: {said(page)}")
            assert overlay(page)["fps"] == "", f"a stale fps while disconnected: {overlay(page)}"
            # the page keeps asking with a growing pause while nobody answers
            wait_until(lambda: "not answering" in message(page) and "tries so far" in message(page), 30,
                       lambda: f"the page does not say it is still trying: {message(page)!r}")
            assert page.evaluate("window.alayaStudio.sessionId") is None

            studio.process = start_server(port, 2, "reference", flags)  # returns once /api/health answers
            answered = time.monotonic()
            shown = presented(page)
            wait_until(lambda: page.evaluate("window.alayaStudio.sessionId") not in (None, first)
                       and status(page).get("frame", 0) > 0 and presented(page) > shown,
                       60, lambda: f"the page did not come back: {message(page)!r}, {overlay(page)}")
            back_after = time.monotonic() - answered
            print(f"frames again {back_after:.2f} s after the studio's health answered")
            assert back_after <= BACK_WITHIN_S, f"frames again {back_after:.1f} s after the studio answered"
            wait_until(lambda: note(page).startswith("back"), 10, lambda: f"the presenter is not told: {note(page)!r}")
            assert server_schedule(studio, page) == applied              # the same timeline, in the new session
            assert "presenter" in page.locator("#alaya-studio").get_attribute("class")
            playing = frames_decoded(page)
            wait_until(lambda: frames_decoded(page) > playing + 10, 30, "the new session does not play on")
    finally:
        stop(studio.process)
