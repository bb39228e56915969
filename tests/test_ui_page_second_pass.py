"""The studio page as a visitor meets it, second pass (issue 28), in Debian's Chromium against a running studio:
a timeline that has played out never locks the style controls, and what the page says matches what happened.
One page for the module, shared by its tests in order."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from helpers.browser import (CHROMIUM, HAVE_CHROMIUM, browser, open_studio, page, server,  # noqa: F401
                             message, play_upload, record_statuses, server_schedule, settled, status, wait_until)

pytestmark = pytest.mark.skipif(not HAVE_CHROMIUM, reason=f"needs Debian's Chromium at {CHROMIUM}")


def import_schedule(page, doc: dict) -> None:
    page.locator("#tl-import-text").evaluate("t => t.closest('details').open = true")
    page.fill("#tl-import-text", json.dumps(doc))
    page.click("#tl-import")
    wait_until(lambda: message(page) == "schedule imported", 20, lambda: f"the import failed: {message(page)!r}")
    settled(page)


def fixed(length: int, *segments: tuple[int, str]) -> dict:
    return {"version": 1, "fps": 30, "length": length,
            "segments": [{"start": start, "prompts": [{"preset": name}]} for start, name in segments]}


def played_past(page, frame: int) -> None:
    page.wait_for_function(f"window.alayaStudio.lastStatus?.frame > {frame}", timeout=120_000)


def test_a_played_out_timeline_never_locks_the_style_controls(page, server):
    page.fill("#alaya-transition", "0")
    import_schedule(page, fixed(30, (0, "polar"), (15, "vaporwave")))
    length = server_schedule(server, page)["length"]
    played_past(page, length + 40)      # past the end, and past coalescing with the last block: it holds
    assert status(page).get("label") == "vaporwave"
    page.click(".alaya-tile[data-preset=cyberpunk]")
    wait_until(lambda: status(page).get("label") == "cyberpunk", 20,
               lambda: f"the tile was not shown: {status(page).get('label')!r}, message {message(page)!r}")
    assert "past" not in message(page), message(page)
    segments = server_schedule(server, page)["segments"]
    assert segments[-1]["prompts"] == [{"preset": "cyberpunk", "weight": 1.0}] and segments[-1]["start"] > length, (
        segments, length)
    page.keyboard.press("2")                                       # the hotkeys too
    hotkey = page.evaluate("window.alayaStudio.hotkeyPresets[1].name")
    wait_until(lambda: status(page).get("label") == hotkey, 20, lambda: f"key 2 was not shown: {message(page)!r}")


def test_a_schedule_applied_after_its_length_has_passed_plays_from_its_first_block(page, server):
    played_past(page, 60)
    record_statuses(page)
    applied_at = status(page)["frame"]
    import_schedule(page, fixed(60, (0, "polar"), (30, "infrared")))
    schedule = server_schedule(server, page)
    assert schedule["segments"][1]["start"] > applied_at and schedule["length"] > applied_at + 30, schedule
    wait_until(lambda: status(page).get("label") == "infrared", 60, "the second block never came")
    labels = [label for _, label in page.evaluate("window.alayaStudio.seen")]
    assert "polar" in labels[:labels.index("infrared")], labels       # its first block was seen first


def test_the_render_status_never_contradicts_the_button(page):
    """While a render runs, the status beside the button never still reports the last render as done."""
    page.fill("#tl-render-frames", "8")
    link = page.locator("#tl-render-link")
    for _ in range(2):
        page.evaluate("""() => { const s = window.alayaStudio; s.renderSeen = [];
            const b = document.querySelector('#tl-render'), st = document.querySelector('#tl-render-status');
            const note = () => s.renderSeen.push([b.textContent, st.textContent]);
            s.renderWatch?.disconnect();
            s.renderWatch = new MutationObserver(note);
            for (const el of [b, st]) s.renderWatch.observe(el, {childList: true, characterData: true, subtree: true});
            b.click(); note(); }""")
        wait_until(lambda: link.is_visible() and page.locator("#tl-render").is_enabled(), 90,
                   "the render never finished")
        assert page.locator("#tl-render-status").inner_text().startswith("done: 8 frames")
        seen = page.evaluate("window.alayaStudio.renderSeen")
        both = [(b, st) for b, st in seen if b.startswith("Rendering") and st.startswith("done")]
        assert not both, both


def outlined(page) -> list[str]:
    return page.evaluate("[...document.querySelectorAll('.alaya-tile.active')].map(t => t.dataset.preset)")


def test_the_controls_show_what_plays_not_what_was_set_before(browser, server):
    page = open_studio(browser, server)
    try:
        playing = wait_until(lambda: status(page).get("label"), 20, "no status")
        wait_until(lambda: page.input_value("#alaya-blend-a") == playing, 20,   # at load: the blend starts from it
                   lambda: f"the blend names {page.input_value('#alaya-blend-a')!r} while {playing!r} plays")
        assert page.input_value("#alaya-blend-b") != playing
        page.fill("#alaya-transition", "0")

        page.fill("#alaya-prompt", "lava")
        page.press("#alaya-prompt", "Enter")
        match = page.locator("#alaya-prompt-match")
        wait_until(lambda: match.inner_text() == "preset Volcano", 20, "no match line")
        page.fill("#alaya-prompt", "")                                  # cleared: the line described nothing
        assert match.inner_text() == ""
        page.fill("#alaya-prompt", "lava")
        page.press("#alaya-prompt", "Enter")
        wait_until(lambda: match.inner_text() == "preset Volcano", 20, "no match line")
        page.click(".alaya-tile[data-preset=polar]")                    # a tile: the prompt no longer plays
        assert match.inner_text() == ""

        page.select_option("#alaya-blend-a", "polar")
        page.select_option("#alaya-blend-b", "infrared")
        page.locator("#alaya-blend").fill("25")
        wait_until(lambda: status(page).get("label") == "polar 0.75 + infrared 0.25", 20, "the blend never played")
        wait_until(lambda: outlined(page) == [], 10, lambda: f"{outlined(page)} outlined during a blend")
        page.click(".alaya-tile[data-preset=cyberpunk]")                # a tile after a blend
        assert page.input_value("#alaya-blend") == "0" and page.input_value("#alaya-blend-a") == "cyberpunk"
        wait_until(lambda: status(page).get("label") == "cyberpunk" and outlined(page) == ["cyberpunk"], 20,
                   lambda: f"{outlined(page)} outlined while {status(page).get('label')!r} plays")
    finally:
        page.close()


def test_messages_speak_of_what_the_visitor_did_with_plurals_right(page):
    page.locator("#alaya-timeline-panel").scroll_into_view_if_needed()
    box = page.locator(".tl-ruler").bounding_box()
    page.mouse.click(box["x"] + box["width"] / 3, box["y"] + box["height"] / 2)   # a seek, on a live engine
    wait_until(lambda: "ruler" in message(page), 20, lambda: f"the refused seek said {message(page)!r}")
    assert "'seek'" not in message(page) and "no past" in message(page)
    stats_line = lambda: page.locator("#alaya-status").inner_text()                # noqa: E731
    refused = wait_until(lambda: re.search(r"(\d+) (requests?) refused", stats_line()), 20,
                         lambda: f"the stats line counts no refusal: {stats_line()!r}")
    assert (refused[2] == "request") == (refused[1] == "1") and "errors" not in stats_line()
    page.evaluate("""() => window.alayaStudio.timeline.set(
        {version: 1, fps: 30, segments: [{start: 0, prompts: [{preset: "polar"}]}]})""")
    page.click(".tl-block[data-index='0']")
    assert page.locator("#tl-info").inner_text().startswith("1 block · open-ended")
    page.evaluate("""() => window.alayaStudio.onMessage({type: "error", request: "schedule",
        message: "segments[2].transition.frames: 700 is longer than the whole schedule (600 frames)"})""")
    assert message(page) == "block 3, transition frames: 700 is longer than the whole schedule (600 frames)"


def test_driving_is_offered_only_where_it_works(page, tmp_path):
    hint = page.locator("#alaya-drive-hint")
    assert hint.is_visible() and "click the picture to drive" in hint.inner_text()      # the live engine
    path = tmp_path / "clip8.npy"
    np.save(path, np.random.default_rng(8).integers(0, 256, (8, 5, 32, 48, 3), dtype=np.uint8))
    spy = "window.alayaStudio.sent"
    page.evaluate(f"() => {{ const s = window.alayaStudio; {spy} = []; const real = s.send.bind(s); "
                  f"s.send = (m) => ({spy}.push(m), real(m)); }}")
    play_upload(page, path)
    assert not hint.is_visible()
    page.click("#alaya-video")
    page.keyboard.press("ArrowUp")
    assert not page.evaluate("window.alayaStudio.driving")
    assert page.evaluate(f"{spy}.filter(m => m.type === 'key').length") == 0 and "needs a live" not in message(page)
    page.select_option("#alaya-source", "engine")
    wait_until(lambda: page.evaluate("window.alayaStudio.hello?.live") and hint.is_visible(), 30,
               "back on the engine, driving is not offered")
    page.click("#alaya-video")
    assert page.evaluate("window.alayaStudio.driving")
    page.keyboard.press("Escape")


def test_the_timeline_stays_free_of_clutter_and_readable(page, server):
    page.fill("#alaya-transition", "0")
    page.evaluate("""() => window.alayaStudio.timeline.set({version: 1, fps: 30,
        segments: [{start: 0, prompts: [{preset: "cyberpunk"}]}]})""")
    settled(page)
    page.click(".alaya-tile[data-preset=polar]")
    wait_until(lambda: len(server_schedule(server, page)["segments"]) == 2, 20, "the tile made no block")
    start = server_schedule(server, page)["segments"][1]["start"]
    played_past(page, start + 45)                                  # well past coalescing with that block
    page.click(".alaya-tile[data-preset=polar]")                   # the same tile again
    page.keyboard.press("4")                                       # and its hotkey (polar is the 4th preset)
    assert page.evaluate("window.alayaStudio.hotkeyPresets[3].name") == "polar"
    played_past(page, status(page)["frame"] + 10)                  # the session has answered both
    settled(page)
    assert [s["start"] for s in server_schedule(server, page)["segments"]] == [0, start]

    page.evaluate("""() => window.alayaStudio.timeline.set({version: 1, fps: 30, segments: [
        {start: 0, prompts: [{preset: "polar"}]},
        {start: 90, prompts: [{preset: "volcano"}], transition: {kind: "linear", frames: 16, easing: "linear"}}]},
        {notify: false})""")
    assert page.locator(".tl-block[data-index='1'] .tl-trans").inner_text() == "linear 16f"
    polar = page.locator(".tl-block[data-index='0'] .tl-label")
    text, background = polar.evaluate("""l => [getComputedStyle(l).color,
        getComputedStyle(l.closest('.tl-block')).backgroundColor]""")
    rgb = lambda css: [int(float(v)) for v in re.findall(r"[\d.]+", css)[:3]]            # noqa: E731
    lum = lambda c: sum(w * (v / 255) ** 2.2 for w, v in zip((0.2126, 0.7152, 0.0722), rgb(c)))   # noqa: E731
    lighter, darker = sorted((lum(text), lum(background)), reverse=True)
    assert (lighter + 0.05) / (darker + 0.05) >= 4.5, (text, background)   # WCAG AA contrast for the label


def test_the_visitors_timeline_survives_a_reload_and_the_page_says_so(browser, server):
    doc = fixed(300, (0, "polar"), (100, "volcano"), (200, "deep_sea"))
    page = open_studio(browser, server)
    try:
        page.evaluate("doc => window.alayaStudio.timeline.set(doc)", doc)
        settled(page)
        kept = server_schedule(server, page)           # the session's own form of it (defaults filled in)
        assert len(kept["segments"]) == 3, kept
        blocks = lambda: [(b["start"], b["prompts"][0]["preset"])                     # noqa: E731
                          for b in page.evaluate("window.alayaStudio.timeline.doc.segments")]
        page.reload()
        wait_until(lambda: page.evaluate("window.alayaStudio?.sessionId"), 60, "no session after the reload")
        # the page restores the timeline and sends it once the new session said hello: wait for each, in turn
        wait_until(lambda: blocks() == [(0, "polar"), (100, "volcano"), (200, "deep_sea")], 30,
                   lambda: f"the page shows {blocks()}")
        wait_until(lambda: server_schedule(server, page) == kept, 30,               # the new session plays it
                   lambda: f"the session plays {server_schedule(server, page)}")
        wait_until(lambda: "your timeline is back" in message(page) and "3 blocks" in message(page), 30,
                   lambda: f"said {message(page)!r}")
        assert "kept in this browser" in page.locator("#tl-kept").inner_text()      # said before any reload too
        page.evaluate("localStorage.setItem('alaya-studio.timeline:engine', '{\"version\": 1, \"segments\": []}')")
        page.reload()                                                  # a damaged copy: a fresh timeline, no error
        wait_until(lambda: page.evaluate("window.alayaStudio?.sessionId"), 60, "no session after the reload")
        assert len(page.evaluate("window.alayaStudio.timeline.doc.segments")) == 1 and message(page) == ""
    finally:
        page.close()


def test_presenter_mode_tells_the_presenter_its_keys_and_what_l_did(browser, server):
    page = open_studio(browser, server)
    note = page.locator("#alaya-presenter-note")
    shown = lambda: "shown" in (note.get_attribute("class") or "")        # noqa: E731
    try:
        page.keyboard.press("p")
        wait_until(lambda: shown() and note.is_visible(), 10, "no note on entering presenter mode")
        for key in ("1–8", "space", "L loop", "Esc"):
            assert key in note.inner_text(), note.inner_text()
        assert "320×176" in note.inner_text()                          # a small stream on a large screen
        wait_until(lambda: not shown(), 30, "the keys note never faded")
        page.keyboard.press("l")                                       # one block on a live engine: nothing to loop
        wait_until(lambda: shown() and "does not loop" in note.inner_text(), 10, lambda: note.inner_text())
        page.keyboard.press("2")
        frame = wait_until(lambda: status(page).get("label") == page.evaluate(
            "window.alayaStudio.hotkeyPresets[1].name") and status(page)["frame"], 20, "key 2 did not switch")
        played_past(page, frame + 45)
        page.keyboard.press("3")                                       # live switches: blocks of a timeline
        wait_until(lambda: len(server_schedule(server, page)["segments"]) == 3, 20, "the switches made no blocks")
        page.wait_for_function("window.alayaStudio.timeline.doc.segments.length === 3", timeout=20_000)
        page.keyboard.press("l")
        wait_until(lambda: server_schedule(server, page).get("loop") is True, 20, "L did not loop the blocks")
        assert "loop on" in note.inner_text()
        assert page.locator("#alaya-video").evaluate("v => getComputedStyle(v).objectFit") == "contain"
    finally:
        page.close()


def test_small_things_the_overlay_the_inspector_and_the_latency_labels(browser, server):
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    try:
        page.goto(f"{server.url}/?size=320x176")
        inspector = page.locator("#alaya-inspector")
        page.wait_for_function("window.alayaStudio?.presets", timeout=60_000)
        if not inspector.evaluate("i => i.src.startsWith('blob:')"):       # no picture yet: no alt text shown
            assert not inspector.is_visible()
        wait_until(lambda: status(page).get("frame", 0) > 0, 60, "the video never played")
        assert "render → send" in page.locator("#alaya-status").inner_text()   # which latency this is
        text = "a very long prompt about a quiet harbour town at dawn with fishing boats"
        page.fill("#alaya-prompt", text)
        page.press("#alaya-prompt", "Enter")
        overlay = page.locator("#alaya-ov-prompt")
        wait_until(lambda: overlay.get_attribute("title") == text, 60,
                   lambda: f"the overlay shows {overlay.get_attribute('title')!r}")  # whole, not cut at 32
        assert overlay.evaluate("o => getComputedStyle(o).textOverflow") == "ellipsis"
        page.evaluate("""() => window.alayaStudio.timeline.set({version: 1, fps: 30, length: 30, loop: true,
            segments: [{start: 0, prompts: [{preset: "polar"}]}]})""")
        played_past(page, 70)
        settled(page)
        frame = page.locator("#alaya-ov-frame")
        wait_until(lambda: re.fullmatch(r"frame \d+ · pass \d+", frame.inner_text()), 20, lambda: frame.inner_text())
        shown, of_timeline = int(frame.inner_text().split()[1]), page.locator("#tl-now").inner_text()
        assert shown < 30 and " · pass " in of_timeline                  # the overlay and the timeline agree
    finally:
        page.close()


def test_free_text_that_matches_no_style_says_so(page):
    """With sentence embeddings the castle is a weak mix of three styles; with the keyword fallback it matches
    nothing. Either way the page says so instead of '≈ …' as if it were a match."""
    page.fill("#alaya-prompt", "a medieval castle in a thunderstorm")
    page.press("#alaya-prompt", "Enter")
    match = page.locator("#alaya-prompt-match")
    wait_until(lambda: match.inner_text(), 60, "no meaning shown")
    assert re.match(r"(nothing in this text matches a style: the picture is shown unstyled \(Original\)"
                    r"|no style clearly matches; shown as a mix: ≈ )", match.inner_text()), match.inner_text()
    page.fill("#alaya-prompt", "asdfgh")                            # gibberish: never a match (issue 45), either way
    page.press("#alaya-prompt", "Enter")
    wait_until(lambda: match.inner_text().startswith("nothing in this text matches a style"), 60,
               lambda: match.inner_text())
    assert match.inner_text().endswith("shown unstyled (Original)")
    page.fill("#alaya-prompt", "lava river")                        # a clear match stays a plain mapping
    page.press("#alaya-prompt", "Enter")
    wait_until(lambda: re.fullmatch(r"≈ Volcano \d+%.*", match.inner_text()), 60, lambda: match.inner_text())
    page.fill("#alaya-prompt", "")
