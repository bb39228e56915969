"""MIDI and the tempo in the studio page, in Debian's Chromium (issue 44 items 4-5). Chromium has Web MIDI but this
machine has no MIDI port, virtual or real, so the page's own handler is fed synthetic `MIDIMessageEvent`s through
`alayaStudio.midiBus`, the one EventTarget the real ports feed too."""

from __future__ import annotations

import json

import pytest

from helpers.browser import CHROMIUM, HAVE_CHROMIUM, browser, page, server, status, wait_until  # noqa: F401

pytestmark = pytest.mark.skipif(not HAVE_CHROMIUM, reason=f"needs Debian's Chromium at {CHROMIUM}")


def midi(page, *data: int) -> None:
    page.evaluate("(d) => window.alayaStudio.midiBus.dispatchEvent("
                  "new MIDIMessageEvent('midimessage', { data: new Uint8Array(d) }))", list(data))


def message(page) -> str:
    return page.inner_text("#alaya-message")


def test_midi_learn_maps_a_note_to_a_style_and_a_cc_to_the_blend(page):
    page.evaluate("localStorage.removeItem('alaya-midi')")
    page.fill("#alaya-transition", "0")
    page.click("#alaya-midi-learn")
    page.click(".alaya-tile[data-preset=volcano]")           # picked as the target, not played
    assert page.inner_text("#alaya-midi-state") == "move a control for volcano"
    midi(page, 0x90, 60, 100)                                # note on, channel 1, middle C
    assert "MIDI note:0:60 → volcano" in message(page)
    assert json.loads(page.evaluate("localStorage.getItem('alaya-midi')")) == {
        "note:0:60": {"target": "preset", "preset": "volcano"}}
    midi(page, 0x90, 60, 100)
    wait_until(lambda: status(page).get("label") == "volcano", 20, "the note never switched to volcano")

    page.click("#alaya-midi-learn")
    page.click("#alaya-blend")
    midi(page, 0xB0, 1, 0)                                   # CC 1 (the mod wheel) learnt for the blend
    assert page.inner_text("#alaya-midi-state") == "2 mapped"
    midi(page, 0xB0, 1, 127)
    assert page.input_value("#alaya-blend") == "100"
    wait_until(lambda: status(page).get("label") != "volcano", 20, "the blend fader moved nothing")


def test_bad_midi_and_a_bad_mapping_file_and_tempo_are_one_line_each(page, tmp_path):
    midi(page, 0x90, 200, 1)
    assert message(page) == "MIDI: a 3-byte message [144, 200, 1] is not a note or a control change"
    bad = tmp_path / "mappings.json"
    bad.write_text(json.dumps({"note:0:61": {"target": "preset", "preset": "nosuchstyle"}}))
    page.set_input_files("#alaya-midi-import", str(bad))
    wait_until(lambda: message(page).startswith("MIDI mappings mappings.json:"), 10, "no line for the bad file")
    assert message(page) == 'MIDI mappings mappings.json: note:0:61: no preset "nosuchstyle"'
    page.fill("#alaya-bpm", "1000")
    page.dispatch_event("#alaya-bpm", "change")
    assert message(page) == "tempo: 1000 is not a BPM between 20 and 300"


def test_midi_clock_sets_the_tempo_and_a_quantized_tile_click_lands_on_a_beat(page):
    # 48 clock ticks at 120 BPM (24 a quarter note: one every 20.83 ms), handed to the page's handler with their
    # arrival times (a browser's timers cannot keep 20 ms steps steady enough to test with)
    page.evaluate("""() => { for (let n = 0; n < 48; n++)
        window.alayaStudio.onMidi(new Uint8Array([0xf8]), 1000 + n * 500 / 24); }""")
    assert float(page.input_value("#alaya-bpm")) == 120.0
    page.select_option("#alaya-quantize", "beat")
    page.click(".alaya-tile[data-preset=polar]")
    wait_until(lambda: status(page).get("label") == "polar", 20, "the quantized switch never landed")
    page.select_option("#alaya-quantize", "off")


def test_with_quantize_on_the_page_tells_the_studio_its_screen_delay(page):
    """The page measures how long a frame takes from leaving the studio to its screen, and sends it as
    `screen_delay` (the studio places quantized switches that much early): estimated from the browser's packet
    received → on screen time with "measure" off, exact from the frame stamp with it on. Quantize off, it
    measures nothing."""
    page.evaluate("""() => { const s = window.alayaStudio, send = s.send.bind(s); s.sentDelays = [];
        s.send = (m) => { if (m.type === 'screen_delay') s.sentDelays.push(m.ms); return send(m); }; }""")
    page.fill("#alaya-bpm", "120")
    page.dispatch_event("#alaya-bpm", "change")
    page.select_option("#alaya-quantize", "beat")
    wait_until(lambda: page.evaluate("window.alayaStudio.sentDelays.length") > 0, 30, "no screen delay was sent")
    estimated = page.evaluate("window.alayaStudio.sentDelays[0]")
    assert 0 < estimated < 2000, estimated
    page.check("#alaya-measure")
    page.evaluate("window.alayaStudio.reportedDelay = null")       # say it again once measured exactly
    wait_until(lambda: page.evaluate("window.alayaStudio.reportedDelay") is not None, 30, "no exact delay sent")
    assert 0 < page.evaluate("window.alayaStudio.reportedDelay") < 2000
    assert "screen_delay" not in message(page)                     # the studio took it without a complaint
    page.uncheck("#alaya-measure")
    page.select_option("#alaya-quantize", "off")
    assert not page.evaluate("window.alayaStudio.timingFrames()")  # neither pinging nor reporting any more
