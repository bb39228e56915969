"""Share this show (issue 45, finding 4), in Debian's Chromium against a running studio: the owner's Share… button
shows the watch link, copies it and draws it as a QR code that reads back to the same link; the watch page fills
its window with the picture's aspect kept and goes full screen; when the owner reloads, the audience reads a
plain "this show is over", and so does anyone who opens the stale link (never raw JSON)."""

from __future__ import annotations

import httpx
import pytest

from helpers.browser import (CHROMIUM, HAVE_CHROMIUM, SIZE, browser, frames_decoded, server,  # noqa: F401
                             wait_until)
from helpers.qr import read_qr

pytestmark = pytest.mark.skipif(not HAVE_CHROMIUM, reason=f"needs Debian's Chromium at {CHROMIUM}")

READ_MODULES = """() => {                       // the QR canvas, one sample in the middle of each 4-px module
    const c = document.getElementById('alaya-share-qr'), n = c.width / 4 - 8;
    const px = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
    return Array.from({ length: n }, (_, y) => Array.from({ length: n }, (_, x) =>
        px[(((y + 4) * 4 + 2) * c.width + (x + 4) * 4 + 2) * 4] < 128));
}"""


@pytest.fixture(scope="module")
def owner(browser, server):
    context = browser.new_context(viewport={"width": 1280, "height": 900},
                                  permissions=["clipboard-read", "clipboard-write"])
    page = context.new_page()
    page.goto(f"{server.url}/?size={SIZE}")
    wait_until(lambda: frames_decoded(page) > 0, 60, "the video never played")
    yield page
    context.close()


def watch_link(server, owner) -> str:
    page = owner.evaluate("window.alayaStudio.hello.watch.page")
    return f"{server.url}{page}"


def test_share_shows_copies_and_draws_the_watch_link(owner, server):
    assert owner.locator("#alaya-share-panel").is_hidden()
    owner.click("#alaya-share")
    assert owner.locator("#alaya-share-panel").is_visible()
    link = watch_link(server, owner)
    assert owner.input_value("#alaya-share-link") == link
    owner.click("#alaya-share-copy")
    wait_until(lambda: owner.locator("#alaya-share-copy").inner_text() == "Copied", 10,
               lambda: f"the button says {owner.locator('#alaya-share-copy').inner_text()!r}")
    assert owner.evaluate("navigator.clipboard.readText()") == link
    assert read_qr(owner.evaluate(READ_MODULES)) == link
    assert "read-only" in owner.locator("#alaya-share-note").inner_text()


def test_the_watch_page_fills_its_window_keeps_the_aspect_and_goes_full_screen(browser, owner, server):
    page = browser.new_page(viewport={"width": 1280, "height": 720})
    try:
        page.goto(watch_link(server, owner))
        page.wait_for_function("document.getElementById('video').videoWidth > 0", timeout=60_000)
        box = page.locator("#video").bounding_box()
        assert box["width"] == 1280 and box["height"] >= 0.85 * 720, f"the picture is {box}, in a 1280×720 window"
        fit = page.evaluate("getComputedStyle(document.getElementById('video')).objectFit")
        assert fit == "contain"                             # letterboxed: the stream's aspect, not stretched
        page.click("#fullscreen")
        page.wait_for_function("document.fullscreenElement !== null", timeout=10_000)
        # the button is relabelled on `fullscreenchange`, which fires after fullscreenElement is set: wait for it
        page.wait_for_function("document.getElementById('fullscreen').innerText === 'Leave full screen'",
                               timeout=10_000)
        page.keyboard.press("f")
        page.wait_for_function("document.fullscreenElement === null", timeout=10_000)
    finally:
        page.close()


def test_after_the_owners_reload_the_audience_reads_that_the_show_is_over(browser, owner, server):
    old = watch_link(server, owner)
    watcher = browser.new_page(viewport={"width": 1280, "height": 720})
    try:
        watcher.goto(old)
        watcher.wait_for_function("document.getElementById('video').videoWidth > 0", timeout=60_000)
        first = owner.evaluate("window.alayaStudio.sessionId")
        owner.reload()                                       # the owner's session ends; a new one starts
        wait_until(lambda: owner.evaluate("window.alayaStudio?.sessionId") not in (None, first), 60,
                   "the owner's page did not start a new session")
        over = watcher.locator("#over")
        wait_until(over.is_visible, 30, lambda: f"the audience sees {watcher.inner_text('body')!r}")
        assert watcher.locator("#over-title").inner_text() == "This show is over"
        assert "ask the presenter" in watcher.locator("#over-text").inner_text()

        watcher.goto(old)                                    # the stale link, opened again
        assert watcher.locator("h1").inner_text() == "This show is over"
        assert '"error"' not in watcher.content()
        assert httpx.get(old).json()["error"]                # a program still gets the JSON line

        owner.click("#alaya-share")
        wait_until(lambda: owner.input_value("#alaya-share-link") == watch_link(server, owner) != old, 10,
                   "the panel does not show the new session's link")
        watcher.goto(watch_link(server, owner))              # the new link plays
        watcher.wait_for_function("document.getElementById('video').videoWidth > 0", timeout=60_000)
    finally:
        watcher.close()
