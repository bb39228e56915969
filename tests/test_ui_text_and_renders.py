"""Stale and raw text, render queue and loop length (issue 45, findings 8 and 12), in Debian's Chromium against a
running studio: the prompt box and the blend follow what plays, the take line goes with its source, validation
reads in a visitor's words with the limits the fields show, /player names its latency, a second visitor's render
waits its turn and says its place, L on a live engine loops what has played whatever the window's width, and a
render's speed is called that. One page for the module, shared by its tests in order; the rules: docs/ui.md. The
queue without a browser: tests/test_render_queue.py."""

from __future__ import annotations

import re

import pytest

from helpers.browser import (CHROMIUM, HAVE_CHROMIUM, SIZE, browser, message, open_studio, page,  # noqa: F401
                             server, server_schedule, sessions_end_with_the_block, settled, status, wait_until)
from studio.ui.jobs import MAX_JOB_FRAMES
from timeline.schedule import MAX_FRAMES
from webrtc.protocol import MAX_SWITCH_FRAMES

pytestmark = pytest.mark.skipif(not HAVE_CHROMIUM, reason=f"needs Debian's Chromium at {CHROMIUM}")


def playing(page) -> list[str]:
    """What the frame on screen plays: its prompts' presets or texts."""
    return [p.get("preset") or p["text"] for p in status(page).get("prompts", [])]


def plays_alone(page, what: str, timeout: float = 60) -> None:
    wait_until(lambda: playing(page) == [what], timeout, lambda: f"{what!r} never played alone: {playing(page)}")


def set_paused(page, paused: bool) -> None:
    page.evaluate(f"window.alayaStudio.send({{type: '{'pause' if paused else 'play'}'}})")
    wait_until(lambda: page.evaluate("window.alayaStudio.paused") is paused, 20, f"paused did not become {paused}")


def test_the_prompt_box_follows_what_plays(page):
    page.fill("#alaya-transition", "0")
    page.fill("#alaya-prompt", "lava")
    page.press("#alaya-prompt", "Enter")
    plays_alone(page, "volcano")
    assert page.input_value("#alaya-prompt") == "lava"               # what the box sent plays: it stays
    page.click(".alaya-tile[data-preset=deep_sea]")
    plays_alone(page, "deep_sea")
    box = page.locator("#alaya-prompt")
    wait_until(lambda: box.input_value() == "Deep Sea", 10, lambda: f"the box says {box.input_value()!r}")
    assert page.locator("#alaya-prompt-match").inner_text() == ""
    page.fill("#alaya-prompt", "polar")                               # typed, not sent: never overwritten
    page.click(".alaya-tile[data-preset=infrared]")
    plays_alone(page, "infrared")
    assert box.input_value() == "polar"
    page.fill("#alaya-prompt", "")


def test_a_late_frame_of_an_earlier_switch_does_not_take_the_box_back(page):
    """Under load a switch sent before the box's text can reach the screen after the box has said what its text
    means (seen in CI: 'lava river' lost its '≈ Volcano' line to a late frame of 'asdfgh'). Paused, no real frame
    moves on; the late frames go through the page's own status handler."""
    page.click(".alaya-tile[data-preset=polar]")
    plays_alone(page, "polar")
    set_paused(page, True)
    try:
        page.fill("#alaya-prompt", "lava river")
        page.press("#alaya-prompt", "Enter")
        match = page.locator("#alaya-prompt-match")
        wait_until(lambda: match.inner_text().startswith("≈ Volcano"), 60, lambda: match.inner_text())
        said = match.inner_text()
        late = lambda prompts: page.evaluate("(p) => window.alayaStudio.followPlaying(p)", prompts)  # noqa: E731
        late([{"text": "asdfgh", "weight": 1.0}])                     # the earlier switch, landing late
        late([{"preset": "polar", "weight": 0.5}, {"text": "asdfgh", "weight": 0.5}])
        assert (page.input_value("#alaya-prompt"), match.inner_text()) == ("lava river", said)
        late([{"text": "lava river", "weight": 1.0}])                 # the box's own text plays: it follows again
        late([{"preset": "infrared", "weight": 1.0}])
        assert (page.input_value("#alaya-prompt"), match.inner_text()) == ("Infrared", "")
    finally:
        set_paused(page, False)
    page.click(".alaya-tile[data-preset=cyberpunk]")
    plays_alone(page, "cyberpunk")


def test_the_blend_starts_from_free_text_and_keeps_it(page):
    text = "a quiet harbour town at dawn with fishing boats"
    page.click(".alaya-tile[data-preset=deep_sea]")                   # the blend starts from the style on screen
    plays_alone(page, "deep_sea")
    page.fill("#alaya-prompt", text)
    page.press("#alaya-prompt", "Enter")
    plays_alone(page, text, 120)                                      # the text matcher may still be loading
    left = page.locator("#alaya-blend-a")
    wait_until(lambda: left.input_value() == f"text:{text}", 10,
               lambda: f"the blend starts from {left.input_value()!r} while the free text plays")
    assert text in left.locator("option:checked").inner_text()
    right = page.input_value("#alaya-blend-b")
    page.locator("#alaya-blend").fill("30")
    wait_until(lambda: sorted(playing(page)) == sorted([text, right]), 30,
               lambda: f"the blend plays {status(page).get('prompts')}, not the free text and {right}")
    weights = {p.get("preset") or p["text"]: p["weight"] for p in status(page)["prompts"]}
    assert weights[text] == pytest.approx(0.7, abs=0.01), weights
    page.click(".alaya-tile[data-preset=cyberpunk]")                  # the module's other tests start from a style
    plays_alone(page, "cyberpunk")


def test_validation_says_what_is_wrong_against_the_limits_the_fields_show(page):
    limits = page.evaluate("window.alayaStudio.config.limits")
    transition = page.locator("#alaya-transition")
    assert int(transition.get_attribute("max")) == limits["switch_transition_frames"] == MAX_SWITCH_FRAMES
    assert int(page.get_attribute("#tl-seg-frames", "max")) == MAX_FRAMES
    assert int(page.get_attribute("#tl-render-frames", "max")) == MAX_JOB_FRAMES
    too_long = MAX_SWITCH_FRAMES * 2
    transition.fill(str(too_long))
    page.click(".alaya-tile[data-preset=polar]")
    said = f"transition: {too_long} frames is more than {MAX_SWITCH_FRAMES} frames, the most it takes"
    wait_until(lambda: message(page) == said, 20, lambda: f"the page said {message(page)!r}")
    transition.fill("0")

    page.locator("#tl-import-text").evaluate("t => t.closest('details').open = true")
    page.fill("#tl-import-text", '{"version": 1, "segments": [{"start": 0, "prompt": "polar"}, '
                                 '{"start": 30, "prompt": "volcano", "transition": {"kind": "linear", "frames": -4}}]}')
    page.click("#tl-import")
    wait_until(lambda: "-4" in message(page), 20, lambda: f"the import said {message(page)!r}")
    text = message(page)
    assert "block 2, transition frames: -4 frames is less than 0 frames, the least it takes" in text, text
    assert "segments[" not in text and "Input should" not in text, text


def test_the_take_line_goes_with_its_source(page):
    take = page.locator("#alaya-take")
    page.click("#alaya-record")
    wait_until(lambda: re.search(r"REC \d+\.\d s · [1-9]\d* frames", take.inner_text()), 60, "the take never recorded")
    page.click("#alaya-record")
    wait_until(lambda: take.inner_text().startswith("take "), 60, "the take to be saved")
    take_id = re.match(r"take (\S+): \d+ frames", take.inner_text()).group(1)
    source = f"take:{take_id}"
    wait_until(lambda: page.locator(f'#alaya-source option[value="{source}"]').count() == 1, 30,
               "the take in the source picker")
    before = page.evaluate("window.alayaStudio.sessionId")
    page.select_option("#alaya-source", source)
    on_take = wait_until(lambda: page.evaluate("window.alayaStudio.sessionId") not in (None, before) and
                         page.evaluate("window.alayaStudio.sessionId"), 60, "a session on the take")
    page.select_option("#alaya-source", "engine")
    wait_until(lambda: page.evaluate("window.alayaStudio.sessionId") not in (None, on_take), 60, "back on the engine")
    wait_until(lambda: status(page).get("frame", 0) > 0, 60, "the engine never played again")
    assert take.inner_text() == "", f"back on the engine, the take line still says {take.inner_text()!r}"


def test_the_player_names_its_latency(browser, server):
    with sessions_end_with_the_block(server):
        player = browser.new_page()
        try:
            player.goto(f"{server.url}/player?size={SIZE}")
            line = player.locator("#status")
            wait_until(lambda: " fps" in line.inner_text(), 60, lambda: f"/player says {line.inner_text()!r}")
            assert re.search(r"render → send \d+(\.\d+)? ms", line.inner_text()), line.inner_text()
            assert not re.search(r"(^|\s)latency", line.inner_text()), line.inner_text()
        finally:
            player.close()


def test_l_on_a_live_engine_loops_what_has_played_whatever_the_window_width(page, server):
    page.evaluate("""() => window.alayaStudio.timeline.set({version: 1, fps: 30, segments: [
        {start: 0, prompts: [{preset: "polar"}]}, {start: 10, prompts: [{preset: "volcano"}]}]})""")
    settled(page)
    page.wait_for_function("window.alayaStudio.lastStatus?.frame > 60", timeout=120_000)
    set_paused(page, True)                        # the frame on screen holds still while L is pressed
    try:
        lengths = []
        for width in (1600, 800):
            page.set_viewport_size({"width": width, "height": 900})
            page.wait_for_function(f"window.innerWidth === {width}")
            played = page.evaluate("window.alayaStudio.lastStatus.frame")
            page.click("#alaya-loop")
            wait_until(lambda: server_schedule(server, page).get("loop") is True, 20, "L did not loop")
            lengths.append((played, server_schedule(server, page)["length"]))
            assert f"loop on: {lengths[-1][1]} frames repeat" in message(page), message(page)
            page.click("#alaya-loop")
            wait_until(lambda: not server_schedule(server, page).get("loop"), 20, "the loop did not go off")
            page.evaluate("""() => { const s = window.alayaStudio, doc = structuredClone(s.timeline.doc);
                delete doc.length; s.timeline.set(doc); }""")          # open-ended again, for the next width
            settled(page)
        assert all(length == played for played, length in lengths), lengths
    finally:
        page.set_viewport_size({"width": 1280, "height": 900})
        set_paused(page, False)


def test_a_second_visitors_render_waits_its_turn_and_says_its_place(browser, server, page):
    """Two visitors render at once: the second one's waits in line (its place shown, nobody else's) and then
    renders; each result names the render's speed as such, not as the video's frame rate."""
    with sessions_end_with_the_block(server):
        second = open_studio(browser, server)
        try:
            page.fill("#tl-render-frames", "150")
            second.fill("#tl-render-frames", "10")
            page.click("#tl-render")
            page.wait_for_function("document.querySelector('#tl-render').textContent.startsWith('Rendering ')",
                                   timeout=60_000)
            second.click("#tl-render")
            waits = second.locator("#tl-render-status")
            wait_until(lambda: waits.inner_text() == "waiting for its turn: next in line", 20,
                       lambda: f"the second visitor sees {waits.inner_text()!r}, {message(second)!r}")
            assert second.locator("#tl-render").inner_text() == "Waiting…"
            for who, frames in ((page, 150), (second, 10)):
                link = who.locator("#tl-render-link")
                wait_until(lambda link=link: link.is_visible(), 300,
                           lambda who=who: f"a render never finished: {message(who)!r}")
                done = who.locator("#tl-render-status").inner_text()
                assert re.fullmatch(rf"done: {frames} frames · render speed \d+\.\d frames/s", done), done
        finally:
            second.close()
