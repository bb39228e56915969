"""The studio page in a real browser (Debian's Chromium through Playwright) against a running server: the
stream plays, presets switch the picture, timeline drags reach the server's schedule, the keyboard drives the
kart, presenter hotkeys work, bad uploads say why. Screenshots of the main views are kept as artefacts
(pytest's tmp dir; also $ALAYA_SCREENSHOTS when set, e.g. docs/img)."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import httpx
import numpy as np
import pytest

from helpers.browser import (AS_ADMIN, CHROMIUM, HAVE_CHROMIUM, SIZE, browser, frames_decoded,  # noqa: F401
                             page, page_auth, server, server_schedule, settled, status, wait_until)
from timeline.schedule import load_schedule

pytestmark = pytest.mark.skipif(not HAVE_CHROMIUM, reason=f"needs Debian's Chromium at {CHROMIUM}")


@pytest.fixture(scope="module")
def shots(tmp_path_factory):
    folder = tmp_path_factory.mktemp("screenshots")
    extra = os.environ.get("ALAYA_SCREENSHOTS")

    def shot(page, name: str, **kw) -> Path:
        path = folder / f"{name}.png"
        page.screenshot(path=str(path), **kw)
        if extra:
            shutil.copy(path, Path(extra) / path.name)
        return path
    return shot


def picture_mean(page) -> list[float]:
    """Mean RGB of the frame the video element shows now."""
    return page.evaluate("""() => {
        const v = document.querySelector('#alaya-video'), c = document.createElement('canvas');
        c.width = v.videoWidth; c.height = v.videoHeight;
        const g = c.getContext('2d'); g.drawImage(v, 0, 0);
        const d = g.getImageData(0, 0, c.width, c.height).data, m = [0, 0, 0];
        for (let i = 0; i < d.length; i += 4) { m[0] += d[i]; m[1] += d[i + 1]; m[2] += d[i + 2]; }
        return m.map((s) => s / (d.length / 4));
    }""")


def inspector(server, page) -> dict | None:
    sid = page.evaluate("window.alayaStudio.sessionId")
    res = httpx.get(f"{server.url}/api/ui/sessions/{sid}/inspector", headers=page_auth(page))
    return res.json() if res.status_code == 200 else None


def test_the_page_opens_on_a_playing_stream(page, shots):
    first = frames_decoded(page)
    wait_until(lambda: frames_decoded(page) >= first + 15, 30, "decoded frame count did not rise")
    assert status(page)["label"] == "cyberpunk"          # the first preset, no setup
    assert page.evaluate("[window.alayaStudio.hello.width, window.alayaStudio.hello.height]") == [320, 176]
    assert page.locator(".alaya-tile").count() >= 8
    wait_until(lambda: page.evaluate("document.querySelector('#alaya-inspector').naturalWidth") > 0, 20,
               "the inspector showed no frame")
    shots(page, "studio", full_page=True)


def test_clicking_a_preset_changes_the_picture(page):
    page.fill("#alaya-transition", "0")
    before = picture_mean(page)
    page.click(".alaya-tile[data-preset=volcano]")
    wait_until(lambda: status(page).get("label") == "volcano", 20, "the server never reported volcano")
    time.sleep(0.5)                                      # a few frames for the picture to arrive
    after = picture_mean(page)
    assert sum(abs(a - b) for a, b in zip(before, after)) > 30, (before, after)
    assert page.locator(".alaya-tile.active").get_attribute("data-preset") == "volcano"


def test_the_blend_slider_mixes_two_prompts(page):
    page.select_option("#alaya-blend-a", "polar")
    page.select_option("#alaya-blend-b", "infrared")
    page.locator("#alaya-blend").fill("25")
    wait_until(lambda: status(page).get("label") == "polar 0.75 + infrared 0.25", 20,
               f"the blend was not reported (last: {status(page).get('label')!r})")


def test_dragging_a_timeline_block_changes_the_schedule_the_server_reports(page, server, shots):
    page.click("#tl-eight")     # applied after its length has passed, it begins later (docs/ui.md, "Past the end")
    wait_until(lambda: len(server_schedule(server, page)["segments"]) == 8, 20, "eight worlds never applied")
    settled(page)
    before = [s["start"] for s in server_schedule(server, page)["segments"]]
    block = page.locator(".tl-block[data-index='3']")
    box = block.bounding_box()
    x, y = box["x"] + box["width"] / 2, box["y"] + box["height"] / 2
    page.mouse.move(x, y)
    page.mouse.down()
    page.mouse.move(x + 30, y, steps=5)
    page.mouse.move(x + 60, y, steps=5)
    page.mouse.up()
    moved = page.evaluate("window.alayaStudio.timeline.doc.segments.map(s => s.start)")
    assert moved[3] > before[3] and moved[4] - moved[3] == 80   # the block moved whole: same length
    wait_until(lambda: [s["start"] for s in server_schedule(server, page)["segments"]] == moved, 20,
               "the server's schedule did not follow the drag")
    shots(page, "timeline", clip=page.locator("#alaya-timeline-panel").bounding_box())
    page.click("#tl-undo")
    wait_until(lambda: server_schedule(server, page)["segments"][3]["start"] == before[3], 20, "undo did not apply")

    knob = page.locator(".tl-block[data-index='5'] .tl-ramp-knob").bounding_box()   # transition: 16 frames
    x, y = knob["x"] + knob["width"] / 2, knob["y"] + knob["height"] / 2
    page.mouse.move(x, y)
    page.mouse.down()
    page.mouse.move(x + page.evaluate("window.alayaStudio.timeline.x(16)"), y, steps=4)
    page.mouse.up()
    wait_until(lambda: abs(server_schedule(server, page)["segments"][5]["transition"]["frames"] - 32) <= 2, 20,
               "dragging the ramp did not lengthen the transition on the server")


def test_keyboard_input_drives_the_kart(page, server):
    page.click("#alaya-video")
    assert page.evaluate("window.alayaStudio.driving")
    before = wait_until(lambda: inspector(server, page), 20, "no inspector frame")
    assert before["meta"]["autopilot"] is True
    page.keyboard.down("Space")                          # brake hard: the autopilot never stops the kart
    stopped = wait_until(lambda: (lambda i: i if i and not i["meta"]["autopilot"] and i["meta"]["speed"] < 0.5
                                  else None)(inspector(server, page)), 30,
                         lambda: f"the kart did not brake to a stop: {inspector(server, page)}")
    page.keyboard.up("Space")
    assert stopped["meta"]["position"] != before["meta"]["position"]   # the G-buffer comes from the new place
    page.keyboard.press("Escape")                        # release: the autopilot drives again
    wait_until(lambda: (lambda i: i and i["meta"]["autopilot"] and i["meta"]["speed"] > 1.0)(inspector(server, page)),
               30, "the autopilot did not resume")


def test_presenter_hotkeys(page, server, shots):
    page.keyboard.press("p")
    assert "presenter" in page.locator("#alaya-studio").get_attribute("class")
    hotkeys = page.evaluate("window.alayaStudio.hotkeyPresets.map(p => p.name)")
    page.keyboard.press("4")
    wait_until(lambda: status(page).get("label") == hotkeys[3], 20, f"hotkey 4 did not switch to {hotkeys[3]}")
    shots(page, "presenter")
    page.keyboard.press("Space")
    wait_until(lambda: page.evaluate("window.alayaStudio.paused"), 10, "space did not pause")
    time.sleep(0.5)
    frame = status(page)["frame"]
    time.sleep(1.0)
    assert status(page)["frame"] == frame                # paused: no new frames
    page.keyboard.press("Space")
    wait_until(lambda: status(page)["frame"] > frame, 10, "space did not resume")
    page.keyboard.press("l")
    wait_until(lambda: server_schedule(server, page).get("loop") is True, 10, "L did not loop the timeline")
    page.keyboard.press("Escape")
    assert "presenter" not in page.locator("#alaya-studio").get_attribute("class")


def test_an_invalid_upload_shows_a_clear_error(page):
    page.set_input_files("#alaya-upload", files=[{"name": "broken.npy", "mimeType": "application/octet-stream",
                                                  "buffer": b"\x93NUMPY not really"}])
    message = page.locator("#alaya-message")
    wait_until(lambda: message.inner_text().startswith("broken.npy: "), 20, "no upload error shown")
    assert "\n" not in message.inner_text()
    playing = frames_decoded(page)
    wait_until(lambda: frames_decoded(page) > playing, 10, "the stream stopped after a bad upload")


def test_a_valid_upload_plays_and_its_timeline_seeks(page, server, tmp_path):
    path = tmp_path / "lap.npy"
    np.save(path, np.random.default_rng(3).integers(0, 256, (60, 5, 32, 48, 3), dtype=np.uint8))
    page.set_input_files("#alaya-upload", str(path))
    wait_until(lambda: page.evaluate("window.alayaStudio.hello?.source") == "uploads/lap.npy", 30,
               lambda: f"the upload did not play: {page.locator('#alaya-message').inner_text()!r}")
    wait_until(lambda: status(page).get("frame", 0) > 5, 30, "the uploaded sequence did not play")
    assert page.locator("#alaya-message").inner_text().startswith("uploaded uploads/lap.npy: 60 frames")
    page.evaluate("window.alayaStudio.send({type: 'pause'})")
    wait_until(lambda: page.evaluate("window.alayaStudio.paused"), 10, "did not pause")
    ruler = page.locator("#tl-ruler").bounding_box()
    page.mouse.click(ruler["x"] + page.evaluate("window.alayaStudio.timeline.x(40)"), ruler["y"] + 5)
    page.evaluate("window.alayaStudio.send({type: 'play'})")
    wait_until(lambda: 40 <= status(page).get("frame", 0) <= 52, 20, "clicking the ruler did not seek to ~40")


def test_editing_importing_and_exporting_the_timeline(page, server, tmp_path):
    # held at a known frame: a looping source sits at frame 0 while the last chunk of a pass renders, and a
    # schedule applied there rightly begins at 0, so "the frame on screen" is set, not caught mid-stream
    page.evaluate("window.alayaStudio.send({type: 'pause'})")
    wait_until(lambda: page.evaluate("window.alayaStudio.paused"), 10, "did not pause")
    page.evaluate("window.alayaStudio.send({type: 'seek', frame: 20})")
    session = f"{server.url}/api/sessions/{page.evaluate('window.alayaStudio.sessionId')}"
    wait_until(lambda: httpx.get(session, headers=page_auth(page)).json()["frame"] == 20, 10, "did not seek to 20")
    page.click("#alaya-timeline-panel summary")
    page.fill("#tl-import-text", '0: "polar", 30: "vaporwave", 60: "deep_sea"')
    page.click("#tl-import")
    wait_until(lambda: page.evaluate("window.alayaStudio.timeline.doc.segments.length") == 3, 10, "no import")
    starts = lambda: page.evaluate("window.alayaStudio.timeline.doc.segments.map(s => s.start)")  # noqa: E731
    # applied mid-stream it begins at the frame on screen: the page shows the shifted blocks once the session's
    # answer is back (until then it shows them as imported, from frame 30), and only then is it settled
    wait_until(lambda: starts()[1] == 50, 30, lambda: f"the import did not begin at frame 20: {starts()}")
    settled(page)
    _, a, b = starts()
    assert (a, b) == (50, 80)
    page.click(".tl-block[data-index='1']")
    page.click("#tl-split")                       # at the playhead if it is inside the block, else its middle
    cut = starts()[2]
    assert starts() == [0, a, cut, b] and a < cut < b
    page.click("#tl-delete")                                  # the selection stays on the first half
    assert starts() == [0, cut, b]
    page.click("#tl-undo")
    assert starts() == [0, a, cut, b]
    page.click("#tl-redo")
    page.click("#tl-undo")
    wait_until(lambda: [s["start"] for s in server_schedule(server, page)["segments"]] == [0, a, cut, b], 20,
               "the edits did not reach the session")
    with page.expect_download() as download:
        page.click("#tl-save")
    saved = tmp_path / "schedule.json"
    download.value.save_as(saved)
    schedule = load_schedule(saved)                           # what `alaya-studio render --schedule` reads
    assert [s.start for s in schedule.segments] == [0, a, cut, b]
    assert schedule.conditioning_at(cut).label() == "vaporwave"
    page.evaluate("window.alayaStudio.send({type: 'play'})")          # the module's page plays on
    wait_until(lambda: not page.evaluate("window.alayaStudio.paused"), 10, "did not resume")


def test_render_to_mp4_from_the_timeline(page):
    page.fill("#tl-render-frames", "8")
    page.click("#tl-render")
    link = page.locator("#tl-render-link")
    wait_until(lambda: link.is_visible(), 60, "the render never finished")
    # the MP4 needs the page's owner key, which a link cannot send: the page fetched it and links the blob
    assert link.get_attribute("href").startswith("blob:")


def test_a_session_the_studio_drops_comes_back_by_itself(page, server):
    first = page.evaluate("window.alayaStudio.sessionId")
    assert httpx.delete(f"{server.url}/api/sessions/{first}", headers=AS_ADMIN).status_code == 204   # the operator
    wait_until(lambda: page.evaluate("window.alayaStudio.sessionId") not in (None, first), 30,
               "the page did not open a new session")
    playing = frames_decoded(page)
    wait_until(lambda: frames_decoded(page) > playing + 10, 30, "the new session does not play")


def test_an_unknown_source_in_the_address_says_so(browser, server):
    page = browser.new_page()
    try:
        page.goto(f"{server.url}/?size={SIZE}&source=nowhere.npy")
        message = page.locator("#alaya-message")
        wait_until(lambda: "no sequence 'nowhere.npy'" in message.inner_text(), 30,
                   lambda: f"no error for a bad source: {message.inner_text()!r}")
        assert message.inner_text().startswith("source: ")
    finally:
        page.close()
