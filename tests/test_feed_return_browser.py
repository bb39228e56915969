"""The return path watched from Debian's Chromium (issue 27): an engine owns its session over feed protocol 2, the
watch link from its welcome plays that session in a browser, and the engine's own style switch shows there."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from gbuffer.feed.client import FeedClient
from gbuffer.frame import GBufferFrame
from renderer.reference.synthetic import synthetic_gbuffer
from studio.server import Settings
from studio.server.background import BackgroundServer

CHROMIUM = "/usr/bin/chromium"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--autoplay-policy=no-user-gesture-required"]
W, H = 160, 96

pytestmark = pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"needs Debian's Chromium at {CHROMIUM}")


def test_a_browser_watches_the_engines_session_and_sees_its_switches():
    playwright = pytest.importorskip("playwright.sync_api")
    with BackgroundServer(Settings(port=0, warm_text_matching=False)) as studio, \
            FeedClient(f"{studio.ws_url}/api/engine/feed", name="game", width=W, height=H, fps=30,
                       output={"prompt": "cyberpunk"}) as engine, playwright.sync_playwright() as p:
        frames = [synthetic_gbuffer(W, H, i / 30, i) for i in range(30)]
        stop = threading.Event()

        def stream() -> None:          # the engine's loop: a frame a tick, styled frames read as they come
            i = 0
            while not stop.wait(1 / 30) and engine.connected:
                engine.send_frame(GBufferFrame(i, i / 30, frames[i % len(frames)].data))
                i += 1
        streamer = threading.Thread(target=stream, daemon=True)
        streamer.start()
        try:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
            page = browser.new_page()
            page.goto(studio.url + engine.welcome["watch"])
            page.wait_for_function("document.getElementById('video').currentTime > 0.3", timeout=90_000)
            page.wait_for_function("document.getElementById('prompt').textContent === 'cyberpunk'", timeout=30_000)
            ack = engine.control({"type": "preset", "name": "volcano"})
            assert ack["type"] == "ack" and ack["label"] == "volcano", ack
            page.wait_for_function("document.getElementById('prompt').textContent.includes('volcano')",
                                   timeout=30_000)
            assert page.evaluate("document.getElementById('video').getVideoPlaybackQuality().totalVideoFrames") > 0
            assert engine.roundtrips.received > 0       # the engine got its styled frames all along
            browser.close()
        finally:
            stop.set()
            streamer.join(5)
