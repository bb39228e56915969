"""The audience's watch page in Debian's Chromium: a watch link plays the owner's session read-only, shows the
active prompt and frame as the owner switches, says "ended" when the owner leaves, and a wrong key is refused."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from studio.server import Settings
from studio.server.background import BackgroundServer

CHROMIUM = "/usr/bin/chromium"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--autoplay-policy=no-user-gesture-required"]

pytestmark = pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"needs Debian's Chromium at {CHROMIUM}")


def test_a_watch_link_follows_the_owners_session_until_it_ends():
    playwright = pytest.importorskip("playwright.sync_api")
    with BackgroundServer(Settings(port=0, width=160, height=96, peer_timeout_s=6)) as studio, \
            playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        owner = browser.new_page()
        owner.goto(studio.url + "/player")
        owner.click("#start")
        owner.wait_for_function("document.getElementById('video').currentTime > 0.3", timeout=90_000)
        (session,) = studio.sessions.values()
        link = session.audience.share()["page"]
        assert link == f"/studio/watch/{session.id}?key={session.audience.key}"

        wrong = httpx.get(f"{studio.url}/studio/watch/{session.id}?key=nope")
        assert wrong.status_code == 401 and "watch key" in wrong.json()["error"]

        watcher = browser.new_page()
        watcher.goto(studio.url + link)
        watcher.wait_for_function("document.getElementById('video').currentTime > 0.3", timeout=90_000)
        watcher.wait_for_function("document.getElementById('prompt').textContent === 'cyberpunk'", timeout=30_000)
        frame = int(watcher.inner_text("#frame"))
        watcher.wait_for_function(f"+document.getElementById('frame').textContent > {frame}", timeout=30_000)
        assert len(session.audience.watchers) == 1

        owner.click("text=volcano")  # the owner steers; the audience sees it
        watcher.wait_for_function("document.getElementById('prompt').textContent.includes('volcano')",
                                  timeout=30_000)
        decoded = watcher.evaluate("document.getElementById('video').getVideoPlaybackQuality().totalVideoFrames")
        assert decoded > 0

        owner.click("#stop")
        watcher.wait_for_function("document.getElementById('state').textContent === 'ended'", timeout=30_000)
        assert watcher.locator("#over").is_visible() and "ended" in watcher.inner_text("#over-text")
        browser.close()
