"""Timelines a person can edit (issue 45, finding 5 and the timeline's zoom of finding 10), in Debian's Chromium
against a running studio: a take's timeline is one block per switch with its ramp drawn inside (not one block per
transition frame), so Split and Delete work on it; a blend-slider drag is one block that names both styles with
their weights and is painted in both colours in proportion; the timeline zooms (buttons, keys, Ctrl+wheel) until
5-frame blocks carry their labels. One page for the module, shared by its tests in order. The rules: docs/ui.md
("Researchers: the timeline"); without a browser: tests/test_schedule_played.py and tests/test_live_timeline.py."""

from __future__ import annotations

import io
import re

import numpy as np
import pytest
from PIL import Image

from helpers.browser import (CHROMIUM, HAVE_CHROMIUM, browser, message, page, record_acks,  # noqa: F401
                             server, server_schedule, set_paused, settled, status, wait_until)

pytestmark = pytest.mark.skipif(not HAVE_CHROMIUM, reason=f"needs Debian's Chromium at {CHROMIUM}")

TRANSITION = 16
CYBERPUNK, VOLCANO = (0xff, 0x2b, 0xd6), (0xe0, 0x40, 0x0f)       # the tiles' colours (prompt_presets data)


def acks(page, request: str) -> list[dict]:
    return page.evaluate(f"window.alayaStudio.acks.filter((m) => m.request === '{request}')")


def played_past(page, frame: int) -> None:
    page.wait_for_function(f"window.alayaStudio.lastStatus?.frame > {frame}", timeout=120_000)


def start_fresh(page, server, preset: str = "cyberpunk") -> None:
    """The session on one block of `preset`, the page showing it."""
    doc = {"version": 1, "fps": 30, "segments": [{"start": 0, "prompts": [{"preset": preset}]}]}
    page.evaluate("doc => window.alayaStudio.timeline.set(doc)", doc)
    wait_until(lambda: len(server_schedule(server, page)["segments"]) == 1, 30, "the one-block timeline")
    settled(page)


def shown_blocks(page) -> list[dict]:
    return page.evaluate("""() => [...document.querySelectorAll('.tl-block')].map((b) => ({
        start: +b.dataset.start, label: b.querySelector('.tl-label').textContent,
        trans: b.querySelector('.tl-trans').textContent, ramp: !!b.querySelector('svg.tl-ramp')}))""")


def block_pixels(page, index: int) -> np.ndarray:
    """The block as drawn on screen, RGB."""
    shot = page.locator(f".tl-block[data-index='{index}']").screenshot()
    return np.asarray(Image.open(io.BytesIO(shot)).convert("RGB")).astype(int)


def rows_of(column: np.ndarray, rgb: tuple[int, int, int]) -> np.ndarray:
    """The rows of a column of pixels painted `rgb`."""
    return np.flatnonzero(np.abs(column - np.array(rgb)).max(axis=1) <= 12)


def test_a_takes_timeline_is_one_block_per_switch_with_its_ramp_and_split_and_delete_work_on_it(page, server):
    start_fresh(page, server)
    page.fill("#alaya-transition", str(TRANSITION))
    record_acks(page)
    page.click("#alaya-record")
    wait_until(lambda: page.evaluate("window.alayaStudio.recording"), 30, "recording did not start")
    played_past(page, status(page)["frame"] + 5)
    for k, preset in enumerate(("volcano", "polar")):             # two tile switches, each played out in full
        page.click(f".alaya-tile[data-preset={preset}]")
        ack = wait_until(lambda k=k: len(acks(page, "preset")) > k and acks(page, "preset")[k], 30,
                         f"no ack ({preset})")
        played_past(page, ack["frame"] + TRANSITION + 35)         # past its ramp and a second (no coalescing)
    page.click("#alaya-record")
    take = page.locator("#alaya-take")
    wait_until(lambda: take.inner_text().startswith("take "), 60, "the take to be saved")
    take_id = re.match(r"take (\S+): \d+ frames", take.inner_text()).group(1)
    source = f"take:{take_id}"
    wait_until(lambda: page.locator(f'#alaya-source option[value="{source}"]').count() == 1, 30, "the take listed")
    before = page.evaluate("window.alayaStudio.sessionId")
    page.select_option("#alaya-source", source)
    wait_until(lambda: page.evaluate("window.alayaStudio.sessionId") not in (None, before), 60, "a session on the take")
    wait_until(lambda: page.evaluate("window.alayaStudio.timeline.doc.segments.length") == 3, 30,
               lambda: f"the take's timeline is not 3 blocks: {shown_blocks(page)}")
    blocks = shown_blocks(page)
    assert [(b["label"], b["trans"], b["ramp"]) for b in blocks] == [
        ("Cyberpunk", "cut", False), ("Volcano", f"linear {TRANSITION}f", True),
        ("Polar", f"linear {TRANSITION}f", True)], blocks
    # Split cuts the volcano block in two (at the playhead, or its middle), Delete removes the second half: both
    # reach the take's session
    starts = [b["start"] for b in blocks]
    page.click(".tl-block[data-index='1']")
    page.click("#tl-split")
    cut = wait_until(lambda: len(server_schedule(server, page)["segments"]) == 4 and
                     server_schedule(server, page)["segments"][2]["start"], 30,
                     lambda: f"split did not reach the session: {server_schedule(server, page)['segments']}")
    assert starts[1] < cut < starts[2] and len(shown_blocks(page)) == 4
    page.click(".tl-block[data-index='2']")
    page.click("#tl-delete")
    wait_until(lambda: [s["start"] for s in server_schedule(server, page)["segments"]] == starts, 30,
               lambda: f"delete did not reach the session: {server_schedule(server, page)['segments']}")
    before = page.evaluate("window.alayaStudio.sessionId")
    page.select_option("#alaya-source", "engine")                 # the module's other tests drive the engine
    wait_until(lambda: page.evaluate("window.alayaStudio.sessionId") not in (None, before), 60, "back on the engine")
    wait_until(lambda: status(page).get("frame", 0) > 2, 60, "the engine plays again")


def test_a_blend_drag_is_one_block_naming_both_styles_with_their_weights_in_both_colours(page, server):
    start_fresh(page, server)
    page.select_option("#alaya-blend-a", "cyberpunk")
    page.select_option("#alaya-blend-b", "volcano")
    settled(page)
    sent = "window.alayaStudio.sent.filter((m) => m.type === 'blend').length"
    page.evaluate("""() => { const s = window.alayaStudio; s.sent = [];
        if (!s.realSend) { s.realSend = s.send;
            s.send = function (m) { this.sent.push(m); return this.realSend(m); }; } }""")
    page.locator("#alaya-blend").scroll_into_view_if_needed()
    slider = page.locator("#alaya-blend").bounding_box()
    y, x0, x1 = slider["y"] + slider["height"] / 2, slider["x"] + 2, slider["x"] + slider["width"] - 1
    page.mouse.move(x0, y)
    page.mouse.down()
    first = None
    for k in range(1, 11):          # a slow drag to the right end: a step sent, and several frames played, each time
        count, frame = page.evaluate(sent), status(page)["frame"]
        page.mouse.move(x0 + (x1 - x0) * k / 10, y, steps=3)
        wait_until(lambda count=count: page.evaluate(sent) > count, 20, f"drag step {k} was not sent")
        first = first if first is not None else frame
        played_past(page, frame + 8)
    page.mouse.up()
    page.keyboard.press("End")
    page.keyboard.press("ArrowLeft")                       # one step back from the end: 1 % cyberpunk, 99 % volcano
    last = "window.alayaStudio.sent.filter((m) => m.type === 'blend').at(-1).prompts"
    wait_until(lambda: [p["weight"] for p in page.evaluate(last)]
               == pytest.approx([0.01, 0.99]), 20, "99 % was not sent")
    assert status(page)["frame"] - first > 60, "the drag lasted under two seconds of frames"
    wait_until(lambda: [p["weight"] for p in server_schedule(server, page)["segments"][-1]["prompts"]]
               == pytest.approx([0.01, 0.99]), 30, lambda: f"the session has {server_schedule(server, page)}")
    settled(page)
    segments = server_schedule(server, page)["segments"]
    assert len(segments) == 2, f"the drag made {len(segments) - 1} blocks: {segments}"   # one, not one a second
    assert segments[1]["transition"]["kind"] == "linear" and segments[1]["transition"]["frames"] > 60, segments
    blocks = shown_blocks(page)
    assert blocks[1]["label"] == "Cyberpunk 1% + Volcano 99%" and blocks[1]["ramp"], blocks
    block = block_pixels(page, 1)
    column = block[2:-2, int(block.shape[1] * 0.8)]        # right of its ramp and its label, clear of its handle
    assert len(rows_of(column, VOLCANO)) >= 0.9 * len(column) and len(rows_of(column, CYBERPUNK)) <= 2, (
        f"a 0.99 volcano blend is not painted volcano: {column.tolist()}")
    # in proportion: a 30/70 blend is 30 % cyberpunk and 70 % volcano, top to bottom
    page.evaluate("""() => window.alayaStudio.timeline.set({version: 1, fps: 30, length: 300, segments: [
        {start: 0, prompts: [{preset: "polar"}]},
        {start: 30, prompts: [{preset: "cyberpunk", weight: 0.3}, {preset: "volcano", weight: 0.7}]}]},
        {notify: false})""")
    assert shown_blocks(page)[1]["label"] == "Cyberpunk 30% + Volcano 70%"
    column = block_pixels(page, 1)[:, -30]
    pink, red = rows_of(column, CYBERPUNK), rows_of(column, VOLCANO)
    inside = len(column) - 2                                         # within its 1-pixel border
    assert abs(len(pink) / inside - 0.3) < 0.06 and abs(len(red) / inside - 0.7) < 0.06, (pink, red, inside)
    assert pink.max() < red.min()                                    # cyberpunk's band above volcano's
    start_fresh(page, server)


def test_the_timeline_zooms_by_buttons_keys_and_ctrl_wheel_until_5_frame_blocks_are_labelled(page, server):
    start_fresh(page, server)
    steps = ["sandstorm", "infrared", "vaporwave", "polar", "volcano"]
    doc = {"version": 1, "fps": 30, "length": 600, "loop": True,
           "segments": [{"start": 0, "prompts": [{"preset": "cyberpunk"}]},
                        *({"start": 300 + 5 * k, "prompts": [{"preset": name}]} for k, name in enumerate(steps))]}
    page.evaluate("doc => window.alayaStudio.timeline.set(doc)", doc)
    settled(page)
    set_paused(page, True)            # the playhead stays put: the zoomed view follows it only while it moves
    try:
        zoom_in_and_out(page, steps)
    finally:
        set_paused(page, False)
    start_fresh(page, server)


def zoom_in_and_out(page, steps: list[str]) -> None:
    labels = """() => [1, 2, 3, 4].map((i) => {
        const l = document.querySelector(`.tl-block[data-index='${i}'] .tl-label`);
        return [l.textContent, l.clientWidth > 0 && l.scrollWidth <= l.clientWidth]; })"""
    titles = [name.capitalize() for name in steps[:4]]
    assert [[t.lower(), fits] for t, fits in page.evaluate(labels)] == [[t.lower(), False] for t in titles]
    # at the whole view, unlabelled slivers
    # keyboard: Tab reaches the zoom buttons (− is off at the whole view), Enter zooms in
    page.focus("#tl-redo")
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.id") == "tl-zoom-in"
    for _ in range(4):
        page.keyboard.press("Enter")
    assert page.locator("#tl-zoom-level").inner_text() == "16×"
    assert page.evaluate(labels) == [[t, True] for t in titles], page.evaluate(labels)
    # the lane scrolls sideways, and the ruler still says which frame is where
    block = page.locator(".tl-block[data-index='2']")
    block.scroll_into_view_if_needed()
    box = block.bounding_box()
    assert page.evaluate(f"window.alayaStudio.timeline.frameAt({box['x'] + 1})") in (305, 306)
    # Ctrl+wheel zooms about the pointer: the block under it stays under it
    x = box["x"] + box["width"] / 2
    page.mouse.move(x, box["y"] + box["height"] / 2)
    page.keyboard.down("Control")
    page.mouse.wheel(0, 100)                              # out
    page.keyboard.up("Control")
    wait_until(lambda: page.locator("#tl-zoom-level").inner_text() == "8×", 10, "Ctrl+wheel did not zoom out")
    box = block.bounding_box()
    assert box["x"] <= x <= box["x"] + box["width"], (x, box)
    # the timeline itself takes the keys: 0 fits it all again
    page.focus("#tl")
    page.keyboard.press("0")
    assert page.locator("#tl-zoom-level").inner_text() == "1×" and page.evaluate(labels) == [[t, False] for t in titles]
    assert "error" not in message(page)
