"""A prepared show is never silently cut (issue 45, findings 2, 3 and 7), in Debian's Chromium against a running
studio: a live switch over Eight worlds keeps every block and says until when it plays, Eight worlds applied
mid-stream plays from its first world, and an import says what it could not carry over. One page for the
module, shared by its tests in order. The rules: docs/ui.md ("Past the end", "Live switches on a prepared
timeline", "Imports"); without a browser: tests/test_live_timeline.py and tests/test_ui_routes.py."""

from __future__ import annotations

import pytest

from helpers.browser import (CHROMIUM, HAVE_CHROMIUM, browser, message, page, record_acks,  # noqa: F401
                             record_statuses, server, server_schedule, set_paused, settled, status, wait_until)

pytestmark = pytest.mark.skipif(not HAVE_CHROMIUM, reason=f"needs Debian's Chromium at {CHROMIUM}")

WORLDS = ["cyberpunk", "volcano", "sandstorm", "polar", "vaporwave", "holy_gold", "deep_sea", "infrared"]
COALESCING = 30         # a switch within a block's first second (at 30 fps) used to replace that block


def ack(page, request: str) -> dict:
    return wait_until(lambda: page.evaluate(f"window.alayaStudio.acks.find((m) => m.request === '{request}')"), 30,
                      f"no ack for {request!r}")


def blocks(doc: dict) -> list[tuple[int, str]]:
    return [(seg["start"], " + ".join(p.get("preset") or p["text"] for p in seg["prompts"])) for seg in doc["segments"]]


def test_a_live_switch_over_eight_worlds_keeps_every_block_and_says_until_when(page, server):
    page.click("#tl-eight")
    wait_until(lambda: len(server_schedule(server, page)["segments"]) == 8, 30,
               lambda: f"Eight worlds did not apply: {message(page)!r}")
    settled(page)
    applied = blocks(server_schedule(server, page))
    volcano, sandstorm = applied[1][0], applied[2][0]
    # Polar a few frames into volcano's block: paused there, so the switch lands within its first second (where
    # it used to coalesce with volcano and replace it) however slowly this machine renders
    page.wait_for_function(f"window.alayaStudio.lastStatus?.frame >= {volcano + 2}", timeout=120_000)
    set_paused(page, True)
    try:
        record_acks(page)
        page.click(".alaya-tile[data-preset=polar]")
        switched = ack(page, "preset")
        at = switched["frame"]
        assert volcano <= at < volcano + COALESCING, f"paused at {at}, not within volcano's first second: {applied}"
        settled(page)
        kept = blocks(server_schedule(server, page))
        assert [b for b in applied if b not in kept] == [], f"Polar at {at} deleted blocks; the session plays {kept}"
        assert kept[1:4] == [(volcano, "volcano"), (at, "polar"), (sandstorm, "sandstorm")], kept
        assert switched["until"] == sandstorm, switched
        info = page.locator("#tl-info")
        wait_until(lambda: f"live switch at frame {at}: until the next block (sandstorm, frame {sandstorm}), every "
                           "block kept" in info.inner_text(), 10, lambda: f"the info line says {info.inner_text()!r}")
    finally:
        set_paused(page, False)                  # the tests after it play on


def test_eight_worlds_applied_mid_stream_plays_from_its_first_world(page, server):
    page.wait_for_function("window.alayaStudio.lastStatus?.frame > 90", timeout=120_000)   # past its first block
    record_acks(page)
    record_statuses(page)
    page.click("#tl-eight")
    at = ack(page, "schedule")["frame"]
    assert 80 < at < 637, f"applied at frame {at}: not mid-show"
    settled(page)
    schedule = server_schedule(server, page)
    assert blocks(schedule) == [(0, "cyberpunk"), *((at + 80 * k, name) for k, name in enumerate(WORLDS) if k)], (
        at, blocks(schedule))
    assert schedule["length"] == 637 + at
    page.wait_for_function(f"window.alayaStudio.lastStatus?.frame > {at + 110}", timeout=120_000)
    seen = dict(page.evaluate("window.alayaStudio.seen"))
    first = [seen[f] for f in range(at, at + 80) if f in seen]
    second = [seen[f] for f in range(at + 96, at + 110) if f in seen]
    assert first and set(first) == {"cyberpunk"}, f"applied at {at}, the first world's frames showed {set(first)}"
    assert second and set(second) == {"volcano"}, f"then {set(second)}"


def test_an_import_says_what_it_could_not_carry_over(page, server):
    said = page.locator("#alaya-message")
    page.locator("#tl-import-text").evaluate("t => t.closest('details').open = true")
    page.fill("#tl-import-text", '30: "polar", 90: "volcano --neg blurry"')
    page.click("#tl-import")
    wait_until(lambda: said.inner_text().startswith("schedule imported, 2 warnings: "), 20,
               lambda: f"the import said {said.inner_text()!r}")
    settled(page)                                       # the applied schedule's ack came and went: still shown
    text = said.inner_text()
    assert "frames 0..29" in text and "keyframe 90 was dropped" in text and "--neg" in text, text
    assert "warn" in said.get_attribute("class"), said.get_attribute("class")
    assert blocks(server_schedule(server, page))[-1][1] == "volcano"           # imported all the same

    page.fill("#tl-import-text", '0: "nosuchstyle"')
    page.click("#tl-import")
    wait_until(lambda: "'nosuchstyle'" in said.inner_text(), 20, lambda: f"the import said {said.inner_text()!r}")
    assert "no style's name" in said.inner_text() and "free text" in said.inner_text(), said.inner_text()
