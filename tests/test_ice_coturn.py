"""ICE through a real TURN server: Debian's coturn on 127.0.0.1 (static user and TURN REST secret), Debian's
Chromium relay-only playing the studio's stream, wrong credentials, and coturn stopped mid-session."""

from __future__ import annotations

import asyncio
import logging
import re
import threading
import time
from pathlib import Path

import httpx
import pytest

from helpers.coturn import TURNSERVER, Coturn
from studio.server import Settings
from studio.server.background import BackgroundServer
from webrtc.client import StudioViewer
from webrtc.ice import IceConfig

CHROMIUM = "/usr/bin/chromium"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--autoplay-policy=no-user-gesture-required"]
PASSWORD, SECRET = "pw-9f3b1c", "secret-77d2e0a4"

pytestmark = [pytest.mark.skipif(TURNSERVER is None, reason="needs coturn's turnserver (apt-get install coturn)"),
              pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"needs Debian's Chromium at {CHROMIUM}")]

# The selected candidate pair and decoded frames, from the page's own RTCPeerConnection (`pc` in /player).
SELECTED_PAIR = """async (peer) => {
  const stats = await (peer || pc).getStats(); let pair = null, frames = 0;
  stats.forEach((r) => {
    if (r.type === "transport" && r.selectedCandidatePairId) pair = stats.get(r.selectedCandidatePairId);
    if (r.type === "inbound-rtp" && r.kind === "video") frames = r.framesDecoded;
  });
  if (!pair) return { frames };
  return { local: stats.get(pair.localCandidateId).candidateType,
           remote: stats.get(pair.remoteCandidateId).candidateType, state: pair.state, frames };
}"""
# Forces the page's peers to relay-only whatever the studio says: Chromium as on a network that lets nothing
# but TURN through, while the studio itself allows every path (so its other sessions may go direct).
FORCE_RELAY = """(() => {
  const Native = window.RTCPeerConnection;
  window.RTCPeerConnection = function (config) {
    return new Native({ ...(config || {}), iceTransportPolicy: "relay" });
  };
  window.RTCPeerConnection.prototype = Native.prototype;
})();"""


@pytest.fixture(scope="module")
def browser():
    playwright = pytest.importorskip("playwright.sync_api")
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        yield browser
        browser.close()


def playing_pair(page, expression: str = SELECTED_PAIR, timeout: float = 120.0) -> dict:
    """The page's selected candidate pair once it has succeeded and more than 10 frames decoded over it (getStats
    is a promise, which wait_for_function does not await: polled here)."""
    deadline = time.monotonic() + timeout
    while True:
        stats = page.evaluate(expression)
        # a pair that carries frames may read "in-progress" while a consent check is out: wait for "succeeded"
        if stats.get("local") and stats["frames"] > 10 and stats.get("state") == "succeeded":
            return stats
        assert time.monotonic() < deadline, f"no frames over a selected pair within {timeout:g} s: {stats}"
        page.wait_for_timeout(250)


def run(coro):
    """asyncio.run in a thread of its own: Playwright's sync API keeps an event loop running in this one."""
    result: dict = {}

    def target() -> None:
        try:
            result["value"] = asyncio.run(coro)
        except BaseException as exc:  # re-raised in the test's thread
            result["error"] = exc
    thread = threading.Thread(target=target)
    thread.start()
    thread.join()
    if "error" in result:
        raise result["error"]
    return result.get("value")


def studio_settings(**ice) -> Settings:
    return Settings(port=0, width=160, height=96, max_sessions=2, peer_timeout_s=4, connect_timeout_s=20,
                    ice=IceConfig(**ice))


def play(page, url: str) -> None:
    page.goto(url + "/player")
    page.click("#start")


@pytest.mark.parametrize("mode", ["static user", "REST secret"])
def test_relay_only_chromium_plays_through_coturn(browser, mode, caplog):
    caplog.set_level(logging.DEBUG)  # every logger, aioice's STUN/TURN traffic included
    creds = dict(user="alaya", password=PASSWORD) if mode == "static user" else dict(secret=SECRET)
    with Coturn(**creds) as turn:
        ice = (dict(turn_user="alaya", turn_password=PASSWORD) if mode == "static user"
               else dict(turn_secret=SECRET))
        with BackgroundServer(studio_settings(servers=(turn.url,), policy="relay", **ice)) as studio:
            config = httpx.get(studio.url + "/api/webrtc/ice").json()
            assert config["iceTransportPolicy"] == "relay" and config["iceServers"][0]["urls"] == [turn.url]
            if mode == "REST secret":  # minted per request: "<expiry>:<label>", never the secret itself
                again = httpx.get(studio.url + "/api/webrtc/ice").json()["iceServers"][0]
                assert re.fullmatch(r"\d{10}:\w+", again["username"])
                assert again["username"] != config["iceServers"][0]["username"]
            page = browser.new_page()
            try:
                play(page, studio.url)
                page.wait_for_function("document.getElementById('video').currentTime > 0.5", timeout=90_000)
                selected = playing_pair(page)
                assert selected["local"] == "relay" and selected["state"] == "succeeded", selected
                (session,) = studio.sessions.values()
                assert " typ relay" in session.pc.localDescription.sdp
                assert " typ host" not in session.pc.localDescription.sdp
            finally:
                page.close()
    logged = caplog.text + turn.log_text()
    assert PASSWORD not in logged and SECRET not in logged


def test_the_studio_page_relays_through_coturn_too(browser, tmp_path):
    """The studio page (Gradio) builds its RTCPeerConnection from the studio's ICE settings as well."""
    from studio.ui import mount_ui

    with Coturn(secret=SECRET) as turn:
        server = BackgroundServer(studio_settings(servers=(turn.url,), turn_secret=SECRET, policy="relay"))
        mount_ui(server.app, cache_dir=tmp_path, prewarm_thumbnails=False)
        with server as studio:
            page = browser.new_page()
            try:
                page.goto(studio.url + "/?size=160x96")
                studio_pair = f"() => ({SELECTED_PAIR})(window.alayaStudio.pc)"
                page.wait_for_function("window.alayaStudio && window.alayaStudio.pc", timeout=120_000)
                selected = playing_pair(page, studio_pair)
                assert selected["local"] == "relay" and selected["state"] == "succeeded", selected
            finally:
                page.close()


@pytest.mark.parametrize("mode", ["static user", "REST secret"])
def test_wrong_turn_credentials_give_the_page_a_clear_message(browser, mode):
    creds = dict(user="alaya", password=PASSWORD) if mode == "static user" else dict(secret=SECRET)
    wrong = (dict(turn_user="alaya", turn_password="not-it") if mode == "static user"
             else dict(turn_secret="not-the-secret"))
    with Coturn(**creds) as turn, BackgroundServer(studio_settings(servers=(turn.url,), policy="relay",
                                                                   **wrong)) as studio:
        page = browser.new_page()
        try:
            play(page, studio.url)
            page.wait_for_function("document.getElementById('status').textContent.includes('ICE failed')",
                                   timeout=60_000)
            message = page.inner_text("#status")
            assert turn.url in message and "--turn-user/--turn-password or --turn-secret" in message, message
        finally:
            page.close()
        # an offer that reaches the studio anyway gets the same diagnosis from the studio's own peer
        async def offer() -> httpx.Response:
            from aiortc import RTCPeerConnection
            pc = RTCPeerConnection()
            pc.addTransceiver("video", direction="recvonly")
            await pc.setLocalDescription(await pc.createOffer())
            async with httpx.AsyncClient(timeout=60) as http:
                res = await http.post(studio.url + "/api/webrtc/offer",
                                      json={"sdp": pc.localDescription.sdp, "type": "offer"})
            await pc.close()
            return res
        res = run(offer())
        assert res.status_code == 502 and res.json()["where"] == "ice"
        assert res.json()["error"].startswith("ICE failed: the TURN server " + turn.url)
        assert not studio.sessions


def test_coturn_stopped_mid_session_ends_that_session_only(browser):
    """The page relays through coturn; another viewer goes direct. coturn dies: the relayed session ends (the
    page says ICE failed), the direct one plays on, and the studio stays healthy."""
    with Coturn(user="alaya", password=PASSWORD) as turn, \
            BackgroundServer(studio_settings(servers=(turn.url,), turn_user="alaya", turn_password=PASSWORD)) as studio:
        page = browser.new_page()
        page.add_init_script(FORCE_RELAY)
        try:
            play(page, studio.url)
            page.wait_for_function("document.getElementById('video').currentTime > 0.5", timeout=90_000)
            assert playing_pair(page)["local"] == "relay"
            (relayed,) = studio.sessions

            async def direct_viewer_outlives_coturn() -> None:
                # direct for sure: the studio's relay candidates are dropped from this viewer's answer
                async with StudioViewer(studio.url, size="96x64", keep_pixels=False, direct_only=True) as direct:
                    await direct.wait_frames(5)
                    turn.stop()
                    await direct.wait_until(lambda: relayed not in studio.sessions, 60,
                                            "the relayed session to end")
                    seen = len(direct.frames)
                    await direct.wait_frames(seen + 20)
                    assert direct.session_id in studio.sessions
            run(direct_viewer_outlives_coturn())
            page.wait_for_function("document.getElementById('status').textContent.includes('ICE failed')",
                                   timeout=60_000)
            assert turn.url in page.inner_text("#status")
            assert httpx.get(studio.url + "/api/health").json()["status"] == "ok"
        finally:
            page.close()
