"""The player page in headless Chromium: it negotiates with the studio, plays the stream, switches presets,
and a killed browser frees its session within seconds."""

from __future__ import annotations

import shutil
import time

import pytest

from studio.server import Settings
from studio.server.background import BackgroundServer

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--autoplay-policy=no-user-gesture-required"]

pytestmark = [pytest.mark.slow, pytest.mark.skipif(CHROMIUM is None, reason="needs a Chromium binary")]


def test_player_page_plays_switches_presets_and_frees_the_session_when_killed():
    playwright = pytest.importorskip("playwright.sync_api")
    with BackgroundServer(Settings(port=0, width=160, height=96, peer_timeout_s=4)) as studio:
        with playwright.sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
            page = browser.new_page()
            page.goto(studio.url + "/")                   # plays without a click
            page.wait_for_function("document.getElementById('video').currentTime > 0.5", timeout=90_000)
            assert "cyberpunk" in page.inner_text("#status")
            (session,) = studio.sessions.values()
            assert session.codec == "video/H264"
            page.click("text=volcano")
            page.wait_for_function("document.getElementById('status').textContent.includes('volcano')",
                                   timeout=30_000)
            browser.close()  # no goodbye: the process is gone
        t0 = time.monotonic()
        while studio.sessions and time.monotonic() - t0 < 20:
            time.sleep(0.2)
        assert not studio.sessions, "a killed tab must free its session within seconds"
