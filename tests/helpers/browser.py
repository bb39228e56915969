"""The studio page in Debian's Chromium through Playwright: launch flags, waiting on the page, and what the
page and its session report. Shared by the browser test files."""

from __future__ import annotations

import time
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--autoplay-policy=no-user-gesture-required"]
SIZE = "320x176"                    # small: two busy CPU cores render and encode the stream
HAVE_CHROMIUM = Path(CHROMIUM).exists()


def wait_until(predicate, timeout: float, what):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out after {timeout:g} s: {what() if callable(what) else what}")


ADMIN = "admin-token-of-the-browser-tests"      # studio_with_ui's; GET /api/sessions is the admin's
AS_ADMIN = {"Authorization": f"Bearer {ADMIN}"}


def live_sessions(server) -> set[str]:
    return {s["session_id"] for s in httpx.get(f"{server.url}/api/sessions", headers=AS_ADMIN, timeout=60).json()}


def page_auth(page) -> dict[str, str]:
    """The owner key the page got from its offer (it keeps it in sessionStorage), as request headers."""
    key = page.evaluate("sessionStorage.getItem('alaya-owner-key')")
    return {"Authorization": f"Bearer {key}"}


@contextmanager
def sessions_end_with_the_block(server, timeout: float = 120):
    """The pages a block opens (and closes) leave no session behind it. A closed tab's session ends when the
    studio notices its peer is gone, which takes longer on a loaded machine; the tests of a module share one
    studio with a session cap, so the next test must not find those slots still taken."""
    before = live_sessions(server)
    yield
    wait_until(lambda: not live_sessions(server) - before, timeout,
               lambda: f"sessions still open after their pages closed: {sorted(live_sessions(server) - before)}")


def frames_decoded(page) -> int:
    return page.evaluate("document.querySelector('#alaya-video')?.getVideoPlaybackQuality().totalVideoFrames || 0")


def status(page) -> dict:
    return page.evaluate("window.alayaStudio?.lastStatus") or {}


def server_schedule(server, page) -> dict:
    sid = page.evaluate("window.alayaStudio.sessionId")
    return httpx.get(f"{server.url}/api/sessions/{sid}/schedule", headers=page_auth(page)).json()


def message(page) -> str:
    return page.locator("#alaya-message").inner_text()


OWNER = "{ headers: { Authorization: `Bearer ${sessionStorage.getItem('alaya-owner-key')}` } }"   # the page's key


def settled(page) -> None:
    """Wait until the session answered every schedule the page sent and the page shows the session's own."""
    page.wait_for_function("""async () => { const OWNER = %s; const s = window.alayaStudio;
        if (s.pendingSchedules) return false;
        const doc = await (await fetch(`/api/sessions/${s.sessionId}/schedule`, OWNER)).json();
        return JSON.stringify(doc) === JSON.stringify(s.timeline.doc); }""" % OWNER, timeout=30_000)


def record_statuses(page) -> None:
    page.evaluate("""() => { const s = window.alayaStudio; s.seen = [];
        if (!s.realOnStatus) { s.realOnStatus = s.onStatus;
            s.onStatus = function (m) { this.seen.push([m.frame, m.label]); return this.realOnStatus(m); }; } }""")


def record_acks(page) -> None:
    """Record every `ack` the session sends from now on (window.alayaStudio.acks)."""
    page.evaluate("""() => { const s = window.alayaStudio; s.acks = [];
        if (!s.realOnMessage) { s.realOnMessage = s.onMessage;
            s.onMessage = function (m) {
                if (m.type === 'ack') this.acks.push(m);
                return this.realOnMessage(m); }; } }""")


def set_paused(page, paused: bool) -> None:
    page.evaluate(f"window.alayaStudio.send({{type: '{'pause' if paused else 'play'}'}})")
    wait_until(lambda: page.evaluate("window.alayaStudio.paused") is paused, 20, f"paused did not become {paused}")


def play_upload(page, path) -> None:
    page.set_input_files("#alaya-upload", str(path))
    wait_until(lambda: page.evaluate("window.alayaStudio.hello?.source") == f"uploads/{path.name}", 30,
               lambda: f"the upload did not play: {message(page)!r}")
    wait_until(lambda: status(page).get("frame", 0) > 2, 30, "the uploaded sequence did not play")


def open_studio(browser, server, query: str = "", **kw):
    """A new studio page, once its video plays."""
    page = browser.new_page(viewport={"width": 1280, "height": 900}, **kw)
    page.goto(f"{server.url}/?size={SIZE}{query}")
    wait_until(lambda: frames_decoded(page) > 0, 60, "the video never played")
    return page


@contextmanager
def studio_with_ui(cache_dir: Path, **settings):
    """A running studio with the UI mounted (thumbnails rendered on demand, uploads up to 4 MB)."""
    from studio.server import Settings
    from studio.server.background import BackgroundServer
    from studio.ui import mount_ui

    srv = BackgroundServer(Settings(port=0, **{"admin_token": ADMIN, **settings}))
    mount_ui(srv.app, cache_dir=cache_dir, upload_limit=4_000_000, prewarm_thumbnails=False)
    with srv:
        yield srv


@contextmanager
def chromium():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


# Module-scoped fixtures for a browser test file (import them by name): one studio, one Chromium, and one studio
# page that the module's tests share, in order (each leaves the session playing).
@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with studio_with_ui(tmp_path_factory.mktemp("ui-cache"), max_sessions=4,
                        takes_dir=tmp_path_factory.mktemp("takes")) as srv:
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
