"""The studio page by keyboard only and at the window sizes people use (issue 45, findings 9 and 10), in Debian's
Chromium against a running studio: Enter or Space on the focused picture drives, the file pickers and the timeline
blocks are reached with Tab and work by keyboard, focus shows; the picture grows with the window up to its native
size, the gallery has no orphan row, and at 800×600 the picture and the timeline are on screen together."""

from __future__ import annotations

import json

import pytest

from helpers.browser import (CHROMIUM, HAVE_CHROMIUM, SIZE, browser, frames_decoded, message,  # noqa: F401
                             open_studio, server, server_schedule, settled, wait_until)

pytestmark = pytest.mark.skipif(not HAVE_CHROMIUM, reason=f"needs Debian's Chromium at {CHROMIUM}")

@pytest.fixture(scope="module")
def page(browser, server):
    """The module's studio page, its file choosers intercepted from the start: Playwright turns interception on
    with the first listener, and a chooser opened while that is still under way is missed (seen here)."""
    page = open_studio(browser, server)
    page.on("filechooser", lambda chooser: None)
    yield page
    page.close()


FOCUSED = """() => { const e = document.activeElement;
    return e ? { id: e.id, tag: e.tagName, text: (e.textContent || '').trim().slice(0, 40),
                 cls: e.className && String(e.className), index: e.dataset?.index ?? null,
                 preset: e.dataset?.preset ?? null } : null; }"""


def focused(page) -> dict:
    return page.evaluate(FOCUSED) or {}


def tab_to(page, wanted, limit: int = 200) -> dict:
    """Press Tab until the focused element is the one `wanted` (a predicate on `focused`) names."""
    for _ in range(limit):
        page.keyboard.press("Tab")
        now = focused(page)
        if wanted(now):
            return now
    raise AssertionError(f"Tab never reached it in {limit} presses; focus is on {focused(page)}")


def start_of_page(page) -> None:
    """Focus back at the top of the document (the next Tab starts there), the page scrolled to its top. A blur
    alone would leave Chromium's sequential focus starting point where the focus was."""
    page.evaluate("""() => { let top = document.getElementById('test-top');
        if (!top) { top = Object.assign(document.createElement('span'), { id: 'test-top', tabIndex: -1 });
                    document.body.prepend(top); }
        top.focus(); window.scrollTo(0, 0); }""")
    page.keyboard.press("Escape")                                   # drive mode off, if a test left it on


def outline(page, selector: str) -> tuple[str, float]:
    return tuple(page.evaluate(f"""() => {{ const s = getComputedStyle(document.querySelector("{selector}"));
        return [s.outlineStyle, parseFloat(s.outlineWidth)]; }}"""))


# ---- finding 9: keyboard only ------------------------------------------------------------------------------------

def test_enter_or_space_on_the_focused_picture_drives_and_space_does_not_scroll(page):
    start_of_page(page)
    assert page.evaluate("document.documentElement.scrollHeight > innerHeight"), "the page cannot scroll: no test"
    assert tab_to(page, lambda f: f.get("id") == "alaya-video")
    style, width = outline(page, "#alaya-video")
    assert style != "none" and width >= 2, f"the focused picture shows no focus ring ({style} {width}px)"
    page.keyboard.press("Enter")
    assert page.evaluate("window.alayaStudio.driving"), "Enter on the focused picture did not start drive mode"
    page.keyboard.press("Escape")
    assert not page.evaluate("window.alayaStudio.driving")
    assert focused(page).get("id") == "alaya-video"
    page.keyboard.press(" ")
    assert page.evaluate("window.alayaStudio.driving"), "Space on the focused picture did not start drive mode"
    assert page.evaluate("window.scrollY") == 0, "Space scrolled the page"
    # Tab away hands the kart back: keys typed in the next field are the visitor's, not the kart's
    page.keyboard.press("Tab")
    assert not page.evaluate("window.alayaStudio.driving"), "the kart stayed driven after focus left the picture"


INSIDE = "() => !!document.activeElement?.closest('#alaya-studio')"


def reachable_by_tab(page, limit: int = 300) -> list[dict]:
    """What Tab reaches in the studio, from the top of the page to where focus leaves the studio."""
    start_of_page(page)
    seen = []
    for _ in range(limit):
        page.keyboard.press("Tab")
        if not page.evaluate(INSIDE):
            if seen:
                return seen
            continue
        seen.append(focused(page))
    raise AssertionError(f"focus never left the studio in {limit} presses of Tab")


def test_every_control_is_reached_with_tab_file_pickers_and_a_timeline_block_too(page):
    seen = reachable_by_tab(page)
    ids = {f["id"] for f in seen if f["id"]}
    texts = {f["text"] for f in seen}
    for picker in ("Upload…", "Load…", "Import MIDI"):
        assert picker in texts, f"{picker} is not reached with Tab"
    assert any("tl-block" in (f["cls"] or "") for f in seen), "no timeline block is reached with Tab"
    # every visible, enabled control of the page is reached (a file input's visible button stands for it)
    controls = page.evaluate("""() => [...document.querySelectorAll(
          '#alaya-studio :is(button, input, select, textarea, summary, video, a[href])')]
        .filter((e) => e.type !== 'file' && !e.disabled && e.getClientRects().length && !e.closest('[hidden]')
                       && !e.closest('details:not([open]) > :not(summary)'))
        .map((e) => e.id || e.dataset.preset || (e.textContent || '').trim().slice(0, 40))""")
    reached = ids | texts | {f["preset"] for f in seen if f["preset"]}
    missed = [c for c in controls if c not in reached]
    assert not missed, f"not reached with Tab: {missed}"


def test_the_file_pickers_open_by_keyboard_and_load_applies_a_schedule(page, server, tmp_path):
    start_of_page(page)
    doc = {"version": 1, "fps": 30, "segments": [{"start": 0, "prompts": [{"preset": "polar"}]},
                                                 {"start": 90, "prompts": [{"preset": "volcano"}]}]}
    path = tmp_path / "two.json"
    path.write_text(json.dumps(doc))
    tab_to(page, lambda f: f["text"] == "Load…")
    with page.expect_file_chooser(timeout=10_000) as chooser:
        page.keyboard.press("Enter")
    chooser.value.set_files(str(path))
    wait_until(lambda: [s["prompts"][0].get("preset") for s in server_schedule(server, page)["segments"]][-2:]
               == ["polar", "volcano"], 30, lambda: f"Load… did not apply: {message(page)!r}")
    for picker in ("Upload…", "Import MIDI"):
        start_of_page(page)
        tab_to(page, lambda f, picker=picker: f["text"] == picker)
        with page.expect_file_chooser(timeout=10_000) as opened:
            page.keyboard.press(" ")
        chooser = opened.value
        assert chooser.element.get_attribute("type") == "file"
        assert chooser.element.evaluate("(e) => e.labels.length > 0 || !!e.getAttribute('aria-label')"), \
            f"{picker}'s file input has no label"


def test_timeline_blocks_take_focus_arrows_split_and_delete(page, server):
    page.click("#tl-eight")
    wait_until(lambda: len(server_schedule(server, page)["segments"]) == 8, 30,
               lambda: f"Eight worlds did not apply: {message(page)!r}")
    settled(page)
    start_of_page(page)
    block = tab_to(page, lambda f: "tl-block" in (f["cls"] or ""))
    style, width = outline(page, ".tl-block:focus")
    assert style != "none" and width >= 2, f"the focused block shows no focus ring ({style} {width}px)"
    first = int(block["index"])
    page.keyboard.press("ArrowRight")
    assert focused(page)["index"] == str(first + 1), focused(page)
    assert page.evaluate("window.alayaStudio.timeline.selected") == first + 1
    page.keyboard.press("End")
    assert focused(page)["index"] == "7"
    page.keyboard.press("Home")
    assert focused(page)["index"] == "0"
    page.keyboard.press("ArrowRight")
    page.keyboard.press("ArrowRight")                                # block 2: sandstorm
    before = page.evaluate("window.alayaStudio.timeline.doc.segments.map((s) => s.start)")
    page.keyboard.press("s")                                         # split it at the playhead or in its middle
    wait_until(lambda: len(server_schedule(server, page)["segments"]) == 9, 30,
               lambda: f"S did not split the block: {message(page)!r}")
    settled(page)
    assert "tl-block" in (focused(page)["cls"] or ""), f"focus left the timeline after a split: {focused(page)}"
    after = page.evaluate("window.alayaStudio.timeline.doc.segments.map((s) => s.start)")
    assert set(before) < set(after) and before[2] < sorted(set(after) - set(before))[0] < before[3], (before, after)
    page.keyboard.press("Delete")
    wait_until(lambda: len(server_schedule(server, page)["segments"]) == 8, 30,
               lambda: f"Delete did not remove the block: {message(page)!r}")
    settled(page)
    assert "tl-block" in (focused(page)["cls"] or ""), f"focus left the timeline after a delete: {focused(page)}"


# ---- finding 10: layout --------------------------------------------------------------------------------------------

def open_at(browser, server, width: int, height: int, size: str = SIZE):
    page = browser.new_page(viewport={"width": width, "height": height})
    page.goto(f"{server.url}/?size={size}")
    wait_until(lambda: frames_decoded(page) > 0, 60, "the video never played")
    return page


def balanced(rows: list[int]) -> bool:
    """Full rows of one length, and a last row of at least half of one: no orphan tile or two."""
    return len(set(rows[:-1])) <= 1 and 2 * rows[-1] >= rows[0]


def box(page, selector: str) -> dict:
    return page.locator(selector).bounding_box()


def gallery_rows(page) -> list[int]:
    return page.evaluate("""() => { const rows = new Map();
        for (const t of document.querySelectorAll('.alaya-tile')) {
            const y = Math.round(t.getBoundingClientRect().top); rows.set(y, (rows.get(y) || 0) + 1); }
        return [...rows.entries()].sort((a, b) => a[0] - b[0]).map((r) => r[1]); }""")


def test_at_1920x1080_the_picture_grows_to_its_native_size_and_the_gallery_is_balanced(browser, server):
    page = open_at(browser, server, 1920, 1080, size="832x448")
    try:
        wait_until(lambda: page.evaluate("document.querySelector('#alaya-video').videoWidth") == 832, 30,
                   "the stream is not 832 wide")
        video = wait_until(lambda: (lambda b: b if abs(b["width"] - 832) <= 1 else None)(box(page, "#alaya-video")),
                           10, lambda: f"the picture is {box(page, '#alaya-video')} at 1920×1080, not 832×448")
        assert abs(video["height"] - 448) <= 1, video
        rows = gallery_rows(page)
        assert balanced(rows), f"the gallery's rows hold {rows} tiles"
        # a narrower window: the picture shrinks with it, its aspect kept, and never overflows the window
        page.set_viewport_size({"width": 1100, "height": 800})
        wait_until(lambda: box(page, "#alaya-video")["width"] < 832, 10, "the picture did not shrink with the window")
        video = box(page, "#alaya-video")
        assert abs(video["width"] / video["height"] - 832 / 448) < 0.01, video
        assert video["x"] + video["width"] <= 1100
        rows = gallery_rows(page)
        assert balanced(rows), f"at 1100 wide the gallery's rows hold {rows} tiles"
    finally:
        page.close()


def test_a_small_stream_keeps_the_pages_picture_size(browser, server):
    # a stream under 640 wide (slow machines, tests) is shown at the page's base size, as before
    page = open_at(browser, server, 1920, 1080)
    try:
        video = box(page, "#alaya-video")
        assert abs(video["width"] - 640) <= 1 and abs(video["width"] / video["height"] - 320 / 176) < 0.01, video
    finally:
        page.close()


def test_at_800x600_the_picture_and_the_timeline_are_on_screen_together(browser, server):
    page = open_at(browser, server, 800, 600)
    try:
        video, lane = box(page, "#alaya-video"), box(page, "#tl")
        for name, b in (("picture", video), ("timeline", lane)):
            assert b["y"] >= 0 and b["y"] + b["height"] <= 600 and b["x"] >= 0 and b["x"] + b["width"] <= 800, \
                f"the {name} is not on screen at 800×600: {b} (picture {video}, timeline {lane})"
        assert video["width"] >= 320, f"the picture is too small to see: {video}"
        rows = gallery_rows(page)
        assert balanced(rows), f"at 800×600 the gallery's rows hold {rows} tiles"
    finally:
        page.close()
