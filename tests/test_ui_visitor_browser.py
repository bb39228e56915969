"""The studio page as a visitor meets it (issue 15), in Debian's Chromium against a running studio: what is
drawn is what renders, messages do not go stale, hotkeys, pause, render feedback, the prompt resolver, loops and
source changes, the timeline's clutter and playhead. One page for the module; tests that need a fresh page or
server open their own."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from helpers.browser import (CHROMIUM, HAVE_CHROMIUM, OWNER, SIZE, browser, frames_decoded, message,  # noqa: F401
                             open_studio, page, play_upload, record_statuses, server, server_schedule,
                             sessions_end_with_the_block, settled, status, wait_until)
from prompt_presets.conditioning import shortened
from timeline.schedule import Schedule
from studio.ui.uploads import NOT_A_SEQUENCE

pytestmark = pytest.mark.skipif(not HAVE_CHROMIUM, reason=f"needs Debian's Chromium at {CHROMIUM}")


def weight_of(conditioning, preset: str) -> float:
    total = sum(p.weight for p in conditioning.prompts)
    return sum(p.weight for p in conditioning.prompts if p.preset == preset) / total


def test_the_drawn_ramp_is_the_schedules_own_curve(page):
    doc = {"version": 1, "fps": 30, "length": 160, "segments": [
        {"start": 0, "prompts": [{"preset": "cyberpunk"}]},
        {"start": 64, "prompts": [{"preset": "volcano"}],
         "transition": {"kind": "linear", "frames": 16, "easing": "ease_in_out"}}]}
    page.evaluate("doc => window.alayaStudio.timeline.set(doc, {notify: false})", doc)
    points = page.evaluate("""() => document.querySelector(".tl-block[data-index='1'] polyline")
        .getAttribute("points").trim().split(/\\s+/).map((p) => p.split(",").map(Number))""")
    schedule = Schedule.from_json(doc)
    width = points[-1][0]
    for k in (2, 4, 8, 12, 14, 16):           # progress k/16 is frame 64 + k - 1 (docs/schedule.md)
        x, y = points[k]
        assert x == pytest.approx(width * k / 16)
        assert 1 - y / 60 == pytest.approx(weight_of(schedule.conditioning_at(64 + k - 1), "volcano"), abs=1e-3)


def spy_sent(page) -> None:
    """Record every data-channel message the page sends from now on (window.alayaStudio.sent)."""
    page.evaluate("""() => { const s = window.alayaStudio; s.sent = [];
        if (!s.realSend) {
            s.realSend = s.send; s.send = function (m) { this.sent.push(m); return this.realSend(m); };
        } }""")


def sent_switches(page) -> list[dict]:
    return page.evaluate("window.alayaStudio.sent.filter((m) => ['preset', 'prompt', 'blend'].includes(m.type))")


def test_messages_expire_or_clear_when_the_same_kind_succeeds(page):
    page.evaluate("window.alayaStudio.send({type: 'preset', name: 'lava land', transition: 0})")
    wait_until(lambda: "unknown preset 'lava land'" in message(page), 20, lambda: f"no error: {message(page)!r}")
    page.fill("#alaya-transition", "0")
    page.click(".alaya-tile[data-preset=polar]")                   # a switch of the same kind succeeds
    wait_until(lambda: message(page) == "", 20, lambda: f"the preset error stayed: {message(page)!r}")

    page.click("#alaya-timeline-panel summary")
    page.fill("#tl-import-text", "not a schedule at all")
    page.click("#tl-import")
    wait_until(lambda: message(page).startswith("import"), 20, lambda: f"no import error: {message(page)!r}")
    page.fill("#tl-import-text", '0: "polar", 30: "vaporwave"')
    page.click("#tl-import")
    wait_until(lambda: message(page) == "schedule imported", 20, "the import's success did not replace its error")
    wait_until(lambda: message(page) == "", 30, "'schedule imported' never went away")


def test_number_keys_switch_presets_on_the_normal_page_but_not_while_typing(page):
    hotkeys = page.evaluate("window.alayaStudio.hotkeyPresets.map(p => p.name)")
    page.fill("#alaya-transition", "0")
    spy_sent(page)
    page.focus("#alaya-prompt")
    page.keyboard.press("2")                                       # typing: a digit in the field
    assert page.input_value("#alaya-prompt").endswith("2")
    page.click("#alaya-status")                                    # out of the field
    page.keyboard.press("3")
    wait_until(lambda: status(page).get("label") == hotkeys[2], 20, f"key 3 did not switch to {hotkeys[2]}")
    assert [m["name"] for m in sent_switches(page)] == [hotkeys[2]]      # nothing sent for the typed "2"
    page.fill("#alaya-prompt", "")


def test_pause_shows_on_the_overlay_and_in_presenter_mode(page):
    badge = page.locator("#alaya-paused-badge")
    page.click("#alaya-pause")
    wait_until(lambda: page.evaluate("window.alayaStudio.paused"), 20, "did not pause")
    assert page.locator("#alaya-ov-fps").inner_text() == "paused" and badge.is_visible()
    page.keyboard.press("p")
    assert "presenter" in page.locator("#alaya-studio").get_attribute("class") and badge.is_visible()
    page.keyboard.press("Space")                                   # play
    wait_until(lambda: not page.evaluate("window.alayaStudio.paused"), 20, "space did not resume")
    wait_until(lambda: page.locator("#alaya-ov-fps").inner_text().endswith(" fps"), 20, "no FPS after play")
    assert not badge.is_visible()
    page.keyboard.press("Escape")


def test_render_button_is_disabled_while_rendering_then_offers_a_download_button(page):
    page.fill("#tl-render-frames", "8")
    spy_requests = []
    page.on("request", lambda r: spy_requests.append(r.method) if r.url.endswith("/api/ui/renders") else None)
    clicked_disabled = page.evaluate("""() => { const b = document.querySelector('#tl-render');
        b.click(); const disabled = b.disabled; b.click(); return disabled; }""")
    assert clicked_disabled                                        # at once, before the job is even posted
    link = page.locator("#tl-render-link")
    wait_until(lambda: link.is_visible() and page.locator("#tl-render").is_enabled(), 90, "the render never finished")
    assert spy_requests == ["POST"]                                # the second click did nothing
    assert "alaya-button" in link.get_attribute("class") and link.get_attribute("href").startswith("blob:")
    assert link.evaluate("a => getComputedStyle(a).backgroundColor") not in ("rgba(0, 0, 0, 0)", "transparent")
    assert "render" not in message(page)


def test_every_box_resolves_prompt_text_the_same_way_and_the_timeline_shows_what_the_session_accepted(page, server):
    doc = {"version": 1, "fps": 30, "segments": [{"start": 0, "prompts": [{"preset": "cyberpunk"}]},
                                                 {"start": 60, "prompts": [{"preset": "polar"}]}]}
    page.evaluate("doc => window.alayaStudio.timeline.set(doc)", doc)
    wait_until(lambda: len(server_schedule(server, page)["segments"]) == 2, 20, "the timeline did not apply")
    settled(page)
    timeline_prompts = "window.alayaStudio.timeline.doc.segments[1].prompts"

    def set_prompt(typed: str, preset: str) -> None:
        page.click(".tl-block[data-index='1']")
        page.fill("#tl-seg-prompt", typed)
        page.click("#tl-seg-set")
        wanted = [{"preset": preset, "weight": 1.0}]
        wait_until(lambda: server_schedule(server, page)["segments"][1]["prompts"] == wanted,
                   20, lambda: f"{typed!r}: the session has {server_schedule(server, page)['segments'][1]}")
        wait_until(lambda: page.evaluate(timeline_prompts) == wanted, 20,
                   lambda: f"{typed!r}: the timeline shows {page.evaluate(timeline_prompts)}")

    for typed, preset in (("lava", "volcano"), ("Holy Gold", "holy_gold")):
        set_prompt(typed, preset)
    assert "unknown preset" not in message(page)
    page.fill("#alaya-transition", "0")
    page.fill("#alaya-prompt", "LAVA")                            # the prompt box: the same preset
    page.press("#alaya-prompt", "Enter")
    wait_until(lambda: status(page).get("label") == "volcano", 20, lambda: f"prompt box: {status(page).get('label')}")
    wait_until(lambda: page.locator("#alaya-prompt-match").inner_text() == "preset Volcano", 20, "no meaning shown")
    page.fill("#alaya-prompt", "")


def test_a_broken_npy_upload_says_what_the_file_is_not(page):
    page.set_input_files("#alaya-upload", files=[{"name": "x.npy", "mimeType": "application/octet-stream",
                                                  "buffer": np.random.default_rng(5).bytes(4096)}])
    wait_until(lambda: message(page).startswith("x.npy: "), 20, "no upload error shown")
    assert message(page) == f"x.npy: {NOT_A_SEQUENCE}"            # visitor words; numpy's line is the API's detail


def test_free_text_shows_which_presets_it_maps_to(page):
    page.fill("#alaya-prompt", "molten rock and fire under an ash sky")
    page.press("#alaya-prompt", "Enter")
    match = page.locator("#alaya-prompt-match")
    wait_until(lambda: match.inner_text().startswith("≈ "), 60, lambda: f"no mapping shown: {match.inner_text()!r}")
    assert "%" in match.inner_text()
    page.fill("#alaya-prompt", "")


def test_the_drive_hint_changes_while_driving(page):
    hint = page.locator("#alaya-drive-hint")
    idle = hint.inner_text()
    page.click("#alaya-video")
    assert page.evaluate("window.alayaStudio.driving") and hint.inner_text() != idle
    assert "you drive" in hint.inner_text()
    page.keyboard.press("Escape")
    assert hint.inner_text() == idle


def test_studio_player_and_docs_work_without_internet_and_have_a_favicon(browser, server):
    """Every request that is not to the studio is aborted; /player plays with no click."""
    with sessions_end_with_the_block(server):   # the next test finds their slots free
        context = browser.new_context()
        outside, errors = [], []
        context.route("**/*", lambda route: route.continue_() if route.request.url.startswith(server.url)
                      else (outside.append(route.request.url), route.abort()))
        try:
            for path, ready in [(f"/?size={SIZE}", "window.alayaStudio?.lastStatus && "
                                 "document.querySelectorAll('.alaya-tile img').length >= 8"),
                                ("/player", "document.getElementById('video').currentTime > 0.5"),
                                ("/docs", "document.querySelectorAll('.swagger-ui .opblock').length > 5")]:
                page = context.new_page()
                page.on("pageerror", lambda exc, path=path: errors.append(f"{path}: {exc}"))
                page.goto(server.url + path)
                try:
                    page.wait_for_function(ready, timeout=90_000)
                except Exception as exc:
                    raise AssertionError(f"{path} did not render: {errors} {outside}") from exc
                icon = page.evaluate("document.querySelector('link[rel~=icon]')?.href")
                assert icon, f"{path} links no favicon"
                res = page.request.get(icon)
                assert res.ok and res.headers["content-type"].startswith("image/"), (path, icon, res.status)
                page.close()
        finally:
            context.close()
        assert not errors
        assert not outside, outside


def recent_labels(page, n: int) -> set[str] | None:
    seen = page.evaluate("window.alayaStudio.seen")
    return {label for _, label in seen[-n:]} if len(seen) >= n else None


def test_a_live_switch_on_a_looping_recording_takes_the_whole_loop(browser, server, tmp_path):
    with sessions_end_with_the_block(server):   # the next test finds their slots free
        path = tmp_path / "clip16.npy"
        np.save(path, np.random.default_rng(4).integers(0, 256, (16, 5, 32, 48, 3), dtype=np.uint8))
        page = open_studio(browser, server)
        try:
            play_upload(page, path)
            record_statuses(page)
            page.fill("#alaya-transition", "0")
            page.click(".alaya-tile[data-preset=volcano]")
            wait_until(lambda: recent_labels(page, 40) == {"volcano"}, 90,       # two and a half passes
                       lambda: f"the loop still mixes styles: {page.evaluate('window.alayaStudio.seen.slice(-40)')}")
            page.fill("#alaya-transition", "16")                                  # as long as the loop itself
            page.click(".alaya-tile[data-preset=polar]")
            wait_until(lambda: recent_labels(page, 40) == {"polar"}, 120,
                       lambda: f"the transition never completed: {page.evaluate('window.alayaStudio.seen.slice(-20)')}")
            assert ([s["prompts"] for s in server_schedule(server, page)["segments"]]
                    == [[{"preset": "polar", "weight": 1.0}]])
            wait_until(lambda: page.evaluate("window.alayaStudio.timeline.doc.segments.length") == 1, 20,
                       "the timeline does not show the loop's one style")
            assert "the whole loop from the next pass" in page.locator("#tl-info").inner_text()
        finally:
            page.close()


def switch_in_turn(page, messages: list[dict]) -> None:
    """Send each message once the previous one's ack came and a later frame was on screen: live switches a few
    frames apart, as quick clicks or a slider drag make them."""
    page.evaluate("""async (messages) => {
        const s = window.alayaStudio, real = s.onMessage;
        try {
            for (const msg of messages) {
                await new Promise((done, fail) => {
                    setTimeout(() => fail(new Error(`no ack and later frame for ${JSON.stringify(msg)}`)), 60000);
                    let acked = null;
                    s.onMessage = function (m) {
                        real.call(this, m);
                        if (m.type === "ack" && m.request === msg.type) acked = m.frame;
                        if (acked !== null && m.type === "status" && m.frame > acked) done();
                    };
                    s.send(msg);
                });
            }
        } finally { s.onMessage = real; }
    }""", messages)


def test_quick_switches_and_a_blend_drag_make_one_block(page, server):
    doc = {"version": 1, "fps": 30, "segments": [{"start": 0, "prompts": [{"preset": "cyberpunk"}]}]}
    page.evaluate("doc => window.alayaStudio.timeline.set(doc)", doc)
    wait_until(lambda: len(server_schedule(server, page)["segments"]) == 1, 20, "the timeline did not apply")
    switch_in_turn(page, [{"type": "preset", "name": name, "transition": 16}
                          for name in ("volcano", "polar", "infrared")])
    segments = server_schedule(server, page)["segments"]
    assert len(segments) == 2 and segments[1]["prompts"] == [{"preset": "infrared", "weight": 1.0}], segments
    # the drag comes more than a second (and a transition) after that block began, so it is a block of its own;
    # waited for in frames, not assumed from how long the clicks took (per-frame hand-over made them quick)
    block_end = segments[1]["start"] + max(16, 30)
    wait_until(lambda: page.evaluate("window.alayaStudio.lastStatus.frame") > block_end, 60,
               "a second of frames after the clicks' block")
    switch_in_turn(page, [{"type": "blend", "mode": "linear", "transition": 0,
                           "prompts": [{"preset": "polar", "weight": 1 - t}, {"preset": "vaporwave", "weight": t}]}
                          for t in (0.25, 0.5, 0.75)])
    segments = server_schedule(server, page)["segments"]
    assert [p["weight"] for p in segments[-1]["prompts"]] == [0.25, 0.75] and len(segments) == 3, segments
    wait_until(lambda: page.evaluate("window.alayaStudio.timeline.doc.segments.length") == 3, 20,
               "the timeline does not show the session's blocks")


def test_dragging_a_block_pushes_the_blocks_after_it(page, server):
    page.click("#tl-eight")     # applied after its length has passed, it begins later (docs/ui.md, "Past the end")
    wait_until(lambda: len(server_schedule(server, page)["segments"]) == 8, 20, "eight worlds never applied")
    settled(page)
    before = page.evaluate("window.alayaStudio.timeline.doc.segments.map(s => s.start)")
    box = wait_until(lambda: page.locator(".tl-block[data-index='3']").bounding_box(), 10, "no block 3")
    x, y = box["x"] + box["width"] / 2, box["y"] + box["height"] / 2
    page.mouse.move(x, y)
    page.mouse.down()
    page.mouse.move(x + 40, y, steps=5)
    page.mouse.up()
    starts = page.evaluate("window.alayaStudio.timeline.doc.segments.map(s => s.start)")
    assert starts[3] > before[3] and starts[:3] == before[:3]
    assert [b - a for a, b in zip(starts[3:], starts[4:])] == [80] * 4      # no block after it changed length
    wait_until(lambda: [s["start"] for s in server_schedule(server, page)["segments"]] == starts, 20,
               "the server's schedule did not follow the drag")


def test_loop_on_the_live_engine_explains_itself_and_a_new_source_starts_its_own_timeline(browser, server, tmp_path):
    with sessions_end_with_the_block(server):   # the next test finds their slots free
        page = open_studio(browser, server)
        try:
            page.click("#alaya-loop")
            wait_until(lambda: "does not loop" in message(page), 10, lambda: f"L said nothing: {message(page)!r}")
            assert not page.evaluate("window.alayaStudio.timeline.doc.loop")
            assert not server_schedule(server, page).get("loop")
            page.click("#tl-eight")                                    # a timeline the visitor built: L loops it
            # applied mid-stream, it begins at the frame on screen: 637 frames from there (docs/ui.md, "Past the end")
            wait_until(lambda: server_schedule(server, page).get("length", 0) > 637, 20, "eight worlds never applied")
            page.click("#alaya-loop")
            wait_until(lambda: server_schedule(server, page).get("loop") is True, 20,
                       "L did not loop the built timeline")

            path = tmp_path / "clip12.npy"
            np.save(path, np.random.default_rng(6).integers(0, 256, (12, 5, 32, 48, 3), dtype=np.uint8))
            play_upload(page, path)
            schedule = server_schedule(server, page)
            assert len(schedule["segments"]) == 1 and not schedule.get("loop") and "length" not in schedule, schedule
            page.click("#tl-undo")                                     # the old timeline is one Undo away
            assert page.evaluate("window.alayaStudio.timeline.doc.length || 0") >= 637
        finally:
            page.close()


def test_the_ruler_fits_the_source_and_the_playhead_stays_in_view(browser, server, tmp_path):
    with sessions_end_with_the_block(server):   # the next test finds their slots free
        page = open_studio(browser, server)
        playhead_in_view = """() => {
            const tl = document.querySelector('#tl'), ph = document.querySelector('#tl-playhead');
            const x = ph.getBoundingClientRect().left - tl.getBoundingClientRect().left;
            return x >= 0 && x <= tl.clientWidth - 1; }"""
        try:
            page.click("#tl-eight")
            wait_until(lambda: page.evaluate("window.alayaStudio.timeline.doc.length || 0") >= 637, 20,
                       "no eight worlds")
            past_the_end = page.evaluate(f"""() => {{ const tl = window.alayaStudio.timeline;
                tl.setPlayhead(tl.doc.length + 63);
                return ({playhead_in_view})(); }}""")
            assert past_the_end, "the playhead left the view past the schedule's end"

            path = tmp_path / "half_second.npy"
            np.save(path, np.random.default_rng(7).integers(0, 256, (15, 5, 32, 48, 3), dtype=np.uint8))
            play_upload(page, path)
            assert page.evaluate("window.alayaStudio.timeline.viewFrames") == 15, page.evaluate(
                "(() => { const t = window.alayaStudio.timeline;"
                " return [t.sourceFrames, t.extent, t.doc, window.alayaStudio.hello]; })()")
            page.wait_for_function(f"""() => window.alayaStudio.lastStatus?.frame > 7 && ({playhead_in_view})()
                && document.querySelector('#tl-playhead').getBoundingClientRect().left -
                   document.querySelector('#tl').getBoundingClientRect().left > 100""", timeout=30_000)
        finally:
            page.close()


SERVE_COLD = """
import sys
from pathlib import Path
from studio.server import Settings
from studio.server.background import BackgroundServer
from studio.ui import mount_ui
srv = BackgroundServer(Settings(port=0, warm_text_matching=False))
mount_ui(srv.app, cache_dir=Path(sys.argv[1]), prewarm_thumbnails=False)
with srv:
    print(srv.url, flush=True)
    sys.stdin.read()
"""


def test_the_first_free_text_prompt_never_stalls_the_stream(browser, tmp_path):
    """A studio in a fresh process whose text matcher is not loaded yet (no warm-up at start): the switch
    waits for the model while frames go on, and the page says so."""
    server = subprocess.Popen([sys.executable, "-c", SERVE_COLD, str(tmp_path)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True, cwd=Path(__file__).resolve().parents[1])
    try:
        url = server.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:"), url
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.goto(f"{url}/?size={SIZE}")
        wait_until(lambda: status(page).get("frame", 0) > 0, 90, "the video never played")
        page.evaluate("""() => { const s = window.alayaStudio, real = s.onMessage; s.log = [];
            s.onMessage = function (m) {
                this.log.push(m.type === 'ack' ? 'ack:' + m.request : m.type); real.call(this, m);
            }; }""")
        text = "molten rock and fire under an ash sky"
        page.fill("#alaya-transition", "0")
        page.fill("#alaya-prompt", text)
        page.press("#alaya-prompt", "Enter")
        wait_until(lambda: message(page).startswith("preparing prompt…"), 30, lambda: f"said {message(page)!r}")
        wait_until(lambda: status(page).get("label") == shortened(text, 32), 120, "the free text never applied")
        log = page.evaluate("window.alayaStudio.log")
        preparing, acked = log.index("preparing"), log.index("ack:prompt")
        assert "status" in log[preparing:acked], log                # frames kept coming while it prepared
    finally:
        server.stdin.close()
        server.wait(30)


def test_the_inspector_overlay_and_charts_stay_readable(page):
    labels = page.locator(".alaya-inspector-label")
    assert labels.all_inner_texts() == ["output", "albedo", "depth", "metallic", "normal", "roughness"]
    assert all(box["height"] >= 12 for box in (labels.nth(k).bounding_box() for k in range(6)))
    for element in ("#alaya-overlay", "#alaya-drive-hint"):      # a dark backdrop on the brightest styles
        alpha = page.locator(element).evaluate("e => getComputedStyle(e).backgroundColor")
        assert alpha.startswith("rgba(0, 0, 0, 0.") and float(alpha.split(",")[-1][:-1]) >= 0.5, (element, alpha)
    fits = page.evaluate("""() => { const s = window.alayaStudio; s.overlay('a very long free text prompt '.repeat(12),
            'frame 123', '29.7 fps');
        const stage = s.$('alaya-stage').getBoundingClientRect(), ov = s.$('alaya-overlay').getBoundingClientRect();
        return ov.right <= stage.right && ov.height < 30; }""")
    assert fits, "a long overlay label runs across the picture"
    page.set_viewport_size({"width": 520, "height": 900})        # narrow: the ms/frame legend wraps
    try:
        page.wait_for_function("""() => { const c = window.alayaStudio.charts[2];
            return c.legendBoxes && c.legendBoxes.length > 2 && c.canvas.width < 500; }""", timeout=30_000)
        boxes, width = page.evaluate(
            "[window.alayaStudio.charts[2].legendBoxes, window.alayaStudio.charts[2].canvas.width]")
        assert all(b["x"] + b["width"] <= width for b in boxes), (boxes, width)
    finally:
        page.set_viewport_size({"width": 1280, "height": 900})


def test_the_timeline_info_follows_the_frame_on_screen(page):
    now = page.locator("#tl-now")
    first = wait_until(lambda: now.inner_text(), 20, "no current frame shown")
    wait_until(lambda: now.inner_text() not in ("", first), 20, "the timeline info never updates")
    assert now.inner_text().startswith("· now frame ") and ", block #" in now.inner_text()
    assert "starts at frame" in page.locator("#tl-info").inner_text()


def test_the_record_button_records_a_take_showing_its_time_and_frames(page, server):
    take = page.locator("#alaya-take")
    page.click("#alaya-record")
    wait_until(lambda: page.evaluate("window.alayaStudio.recording"), 30, "recording did not start")
    assert page.locator("#alaya-record").get_attribute("aria-pressed") == "true"
    wait_until(lambda: re.search(r"REC \d+\.\d s · [1-9]\d* frames", take.inner_text()), 60,
               "elapsed time and a frame count while recording")
    page.click("#alaya-record")
    wait_until(lambda: take.inner_text().startswith("take "), 60, "the take to be saved")
    assert not page.evaluate("window.alayaStudio.recording")
    take_id, frames = re.match(r"take (\S+): (\d+) frames", take.inner_text()).groups()
    meta = json.loads((server.settings.takes_path / take_id / "take.json").read_text())
    assert meta["frames"] == int(frames) > 0 and meta["stopped_because"] is None
    assert "take saved" in message(page)
    # the take is now a source: picked, it plays with its own schedule on the timeline
    source = f"take:{take_id}"
    wait_until(lambda: page.locator(f'#alaya-source option[value="{source}"]').count() == 1, 30,
               "the take in the source picker")
    before = page.evaluate("window.alayaStudio.sessionId")
    page.select_option("#alaya-source", source)
    played = Schedule.from_json(json.loads((server.settings.takes_path / take_id / "schedule.json").read_text()))
    wait_until(lambda: page.evaluate("window.alayaStudio.timeline.doc.length") == played.length, 30,
               "the take's schedule on the timeline")
    session = wait_until(lambda: page.evaluate("window.alayaStudio.sessionId") not in (None, before) and
                         page.evaluate("window.alayaStudio.sessionId"), 60, "a session on the take")
    shown = page.evaluate(f"""async () => (await (await fetch('/api/sessions/{session}', {OWNER})).json()).source""")
    assert shown == source
    page.select_option("#alaya-source", "engine")            # the module's other tests drive the engine
    wait_until(lambda: page.evaluate("window.alayaStudio.sessionId") not in (None, session), 60,
               "back on the engine")


def test_the_page_measures_glass_to_glass_latency_from_the_stamp_it_reads_back(page):
    """Measure on: the server stamps each frame, the page reads the stamp off the picture it presents and shows
    the latency from render start to screen; off: no stamp, no figures."""
    page.check("#alaya-measure")
    wait_until(lambda: (page.evaluate("window.alayaStudio.latencyNow") or {}).get("samples", 0) >= 10, 60,
               "glass-to-glass samples from stamped frames")
    now = page.evaluate("window.alayaStudio.latencyNow")
    assert 0 < now["median"] <= now["p95"] < 10_000, now
    assert re.fullmatch(r"glass-to-glass \d+ ms median · \d+ ms p95 \(last 2 s\)",
                        page.locator("#alaya-g2g").inner_text())
    # one machine, one clock: the ping/pong offset estimate is near zero
    assert abs(page.evaluate("window.alayaStudio.clockOffset()")) < 50
    # and each presented frame's milliseconds split by stage, the server's figures and the browser's
    stages = page.evaluate("window.alayaStudio.presentedLog.filter((p) => p.stages).at(-1).stages")
    assert set(stages) == {"take", "render", "wait", "encode", "network", "decode", "display"}, stages
    assert stages["take"] > 0 and stages["render"] > 0 and stages["encode"] > 0 and stages["decode"] >= 0, stages
    page.uncheck("#alaya-measure")
    wait_until(lambda: page.evaluate("window.alayaStudio.readStamp()") is None, 30, "the stamp gone from the picture")
    assert page.locator("#alaya-g2g").inner_text() == ""


def test_a_second_visitors_page_is_refused_on_the_first_ones_session_which_plays_on(browser, server, page):
    """Issue 26, in Chromium: a second visitor's tab has a key of its own and, with no key, a wrong key or its
    own, every route on the first visitor's session answers 401; the first visitor's video plays on."""
    first = page.evaluate("window.alayaStudio.sessionId")
    with sessions_end_with_the_block(server):
        other = open_studio(browser, server)
        try:
            tried = other.evaluate("""async (sid) => {
                const own = sessionStorage.getItem('alaya-owner-key'), out = [];
                const routes = [["GET", `/api/sessions/${sid}`], ["GET", `/api/sessions/${sid}/schedule`],
                    ["POST", `/api/sessions/${sid}/take`], ["DELETE", `/api/sessions/${sid}`],
                    ["GET", `/api/ui/sessions/${sid}/inspector`], ["GET", `/api/ui/sessions/${sid}/inspector.png`],
                    ["POST", `/whep/${sid}`], ["GET", "/api/sessions"]];
                for (const [method, url] of routes) for (const key of [null, "wrong", own]) {
                    const headers = { "Content-Type": "application/json" };
                    if (key) headers.Authorization = `Bearer ${key}`;
                    const res = await fetch(url, { method, headers,
                        body: method === "POST" ? JSON.stringify({ action: "start" }) : undefined });
                    out.push([method, url, key === own ? "own key" : key, res.status, (await res.json()).error]);
                }
                return { own, out }; }""", first)
            assert tried["own"] and tried["own"] != page.evaluate("sessionStorage.getItem('alaya-owner-key')")
            assert len(tried["out"]) == 24 and all(status == 401 for *_, status, _ in tried["out"]), tried["out"]
            assert all("\n" not in error for *_, error in tried["out"])
            playing = frames_decoded(page)
            wait_until(lambda: frames_decoded(page) > playing + 15, 30, "the first visitor's video stopped")
            assert page.evaluate("window.alayaStudio.sessionId") == first and first in server.sessions
        finally:
            other.close()
