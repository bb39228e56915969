"""/player as a visitor (issue 26): the plain player keeps its owner key without the visitor seeing it, ends its
session with it (the owner's DELETE, 204) and offers with it again as the same visitor; no URL carries it."""

from __future__ import annotations

import pytest

from helpers.browser import chromium, wait_until
from studio.server import Settings
from studio.server.background import BackgroundServer

pytestmark = pytest.mark.slow


def test_the_player_sends_its_owner_key_with_every_session_route_and_never_in_a_url():
    with BackgroundServer(Settings(port=0, width=160, height=96)) as studio, chromium() as browser:
        page = browser.new_page()
        urls = []
        page.on("request", lambda r: urls.append(r.url))
        page.goto(studio.url + "/player")
        page.wait_for_function("document.getElementById('video').currentTime > 0.3", timeout=90_000)
        (session,) = studio.sessions.values()
        key = page.evaluate("sessionStorage.getItem('alaya-owner-key')")
        assert key == session.owner_key and key not in page.inner_text("body")

        with page.expect_response(lambda r: r.request.method == "DELETE") as ended:
            page.click("#stop")
        assert ended.value.status == 204 and ended.value.url.endswith(f"/api/sessions/{session.id}")
        assert ended.value.request.all_headers()["authorization"] == f"Bearer {key}"
        wait_until(lambda: not studio.sessions, 30, "the stopped session to end")

        with page.expect_response(lambda r: r.url.endswith("/api/webrtc/offer")) as offered:
            page.click("#start")
        assert offered.value.request.all_headers()["authorization"] == f"Bearer {key}"
        assert offered.value.json()["owner_key"] == key                     # the same visitor again
        page.wait_for_function("document.getElementById('status').textContent.includes('frame')", timeout=90_000)
        assert not [u for u in urls if key in u]
