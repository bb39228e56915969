"""Switches on the beat and at a time (issue 44 item 4): a show's tempo, a switch quantized to its next beat or
bar, and an OSC bundle's timetag, each placed on the timeline ahead of time on the frame the studio sends then,
and placed again before each chunk as that moment nears. At the schedule level (no server) the quantized switch
lands on the frame of its beat, and moves with the frames when they slip; with a real studio the first frame in
the new style is the frame the studio last named (its ack, or a `timeline` message since); bad tempo and
timetags get one line."""

from __future__ import annotations

import asyncio
import time

import pytest
import torch
from pythonosc.osc_bundle_builder import OscBundleBuilder
from pythonosc.osc_message_builder import OscMessageBuilder
from pythonosc.udp_client import SimpleUDPClient

from helpers.browser import ADMIN, AS_ADMIN
from helpers.sessions import wait_no_sessions
from studio.server import Settings
from studio.server.background import BackgroundServer
from studio.server.commands import COMMANDS, SessionParts, switch_now
from test_osc import free_udp_port, osc_counts
from timeline.schedule import Schedule
from timeline.schedule.live import LiveTimeline
from timeline.tempo import Tempo, TempoError
from webrtc import protocol as dc
from webrtc.client import StudioViewer

VIEW = {"size": "64x32", "source": "demo", "keep_pixels": False}
FPS = 30.0


# ---- the tempo and the schedule, without a server ---------------------------------------------------------------

def test_a_tempos_beats_and_bars_fall_on_its_grid_and_a_beat_moves_it():
    tempo = Tempo(120, anchor=100.0)                       # a beat every 0.5 s, a bar every 2 s
    assert tempo.next(100.0) == 100.0 and tempo.next(100.01) == 100.5 and tempo.next(101.2, "bar") == 102.0
    assert tempo.next(99.9) == 100.0 and tempo.next(98.7, "bar") == 100.0
    moved = tempo.beat(101.1)                              # an external tick 0.1 s late on beat 3 of the bar
    assert moved.next(101.1) == pytest.approx(101.1) and moved.next(101.2, "bar") == pytest.approx(102.1)
    assert tempo.beat(101.3, downbeat=True).next(101.31, "bar") == pytest.approx(103.3)


@pytest.mark.parametrize("bpm", [0, 19.9, 301, float("nan")])
def test_a_bad_tempo_is_one_line(bpm):
    with pytest.raises(TempoError, match=r"^tempo: bpm must be within 20\.\.300"):
        Tempo(bpm, anchor=0.0)


class Rollout:
    """What a switch's step reads of the rollout: the next frame it renders."""

    def __init__(self, frame_index: int):
        self.frame_index = frame_index


def test_a_quantized_switch_lands_on_the_frame_of_its_beat():
    """The session sends frame f at t0 + f / fps; at 120 BPM anchored at t0 the beats fall on frames 0, 15, 30…
    With frame 20 next to render, a switch quantized to the beat lands on frame 30, and one to the bar on 60."""
    t0 = time.time() - 20 / FPS                              # frame 20 is sent now
    for unit, frame in (("beat", 30), ("bar", 60)):
        timeline = LiveTimeline(Schedule.single("cyberpunk"))
        parts = SessionParts(Rollout(20), timeline, None, None, "demo", 64, 32, stats=lambda: None,
                             frame_at=lambda t: (t - t0) * FPS, tempo=Tempo(120, anchor=t0))
        step = switch_now(parts, dc.build(dc.SetPreset, name="polar", quantize=unit))
        ack = step.run(parts, dc.build(dc.SetPreset, name="polar", quantize=unit), step.data)
        assert ack.frame == frame
        assert timeline.conditioning_at(frame - 1).label() == "cyberpunk"
        assert timeline.conditioning_at(frame).label() == "polar"


def test_a_known_screen_delay_places_a_quantized_or_timed_switch_that_much_earlier():
    """The owner's page said a frame takes 100 ms from leaving the studio to its screen (3 frames at 30 fps): the
    beat at frame 30 is met by sending the new style on frame 27, and a time 2 s on by frame 80 - 3."""
    t0 = time.time() - 20 / FPS
    for message, frame in ((dc.build(dc.SetPreset, name="polar", quantize="beat"), 27),
                           (dc.build(dc.SetPreset, name="polar", at=t0 + 80 / FPS), 77)):
        timeline = LiveTimeline(Schedule.single("cyberpunk"))
        parts = SessionParts(Rollout(20), timeline, None, None, "demo", 64, 32, stats=lambda: None,
                             frame_at=lambda t: (t - t0) * FPS, tempo=Tempo(120, anchor=t0))
        assert COMMANDS["screen_delay"](parts, dc.build(dc.ScreenDelay, ms=100)) is None     # not answered
        step = switch_now(parts, message)
        assert step.run(parts, message, step.data).frame == frame
        assert timeline.conditioning_at(frame).label() == "polar"


def test_a_quantized_switch_is_placed_again_as_its_beat_nears_when_the_frames_slip():
    """Placed on frame 30 (its beat) from the frames sent so far; then a stall delays every frame 100 ms (3 frames):
    the frame sent on the beat is now 27, and before the next chunk the block moves there. A switch whose block
    was rendered, or that the visitor edited since, stays where it is and is forgotten."""
    t0 = time.time() - 20 / FPS
    slip = [0.0]
    timeline = LiveTimeline(Schedule.single("cyberpunk"))
    rollout = Rollout(20)
    parts = SessionParts(rollout, timeline, None, None, "demo", 64, 32, stats=lambda: None,
                         frame_at=lambda t: (t - t0 - slip[0]) * FPS, tempo=Tempo(120, anchor=t0))
    message = dc.build(dc.SetPreset, name="polar", quantize="beat")
    step = switch_now(parts, message)
    assert step.run(parts, message, step.data).frame == 30
    rollout.frame_index = 24
    assert parts.place_timed_again() == []                      # on time: nothing moves
    slip[0] = 0.02                                              # 0.6 frames: within the hysteresis, it stays
    assert parts.place_timed_again() == []
    slip[0] = 0.1
    assert parts.place_timed_again() == [27]
    assert timeline.conditioning_at(26).label() == "cyberpunk" and timeline.conditioning_at(27).label() == "polar"
    assert [seg.start for seg in timeline.schedule.segments] == [0, 27]
    slip[0] = -0.1                                              # frames now run ahead: never before `first`
    rollout.frame_index = 30
    assert parts.place_timed_again() == [] and parts.timed.pending == []    # 27 is rendered: forgotten
    # A block the visitor edits after it was placed is theirs: left as edited, forgotten.
    step = switch_now(parts, message := dc.build(dc.SetPreset, name="infrared", quantize="bar"))
    at = step.run(parts, message, step.data).frame
    timeline.patch(at - 2, dc_conditioning("volcano"), 0)       # the editor puts volcano there: infrared is gone
    slip[0] = 0.3
    assert parts.place_timed_again() == [] and parts.timed.pending == []
    assert timeline.conditioning_at(at).label() == "volcano"


def test_a_block_moves_only_between_its_neighbours_and_only_as_it_was_placed():
    timeline = LiveTimeline(Schedule.single("cyberpunk"))
    timeline.patch(30, dc_conditioning("polar"), 0)
    timeline.patch(40, dc_conditioning("volcano"), 0)
    polar = timeline.schedule.segment_at(30)
    assert timeline.move(polar, 40) is None and timeline.move(polar, 0) is None       # onto a neighbour
    assert timeline.move(timeline.schedule.segment_at(0), 5) is None                  # never the first block
    moved = timeline.move(polar, 33)
    assert moved is not None and moved.start == 33 and timeline.conditioning_at(32).label() == "cyberpunk"
    assert timeline.move(polar, 35) is None            # the block as placed is gone: it moved (or was edited)


def dc_conditioning(name: str):
    from studio.server.commands import conditioning_from_message
    return conditioning_from_message(dc.build(dc.SetPreset, name=name))


@pytest.mark.parametrize("body", ['{"type": "screen_delay", "ms": -1}', '{"type": "screen_delay", "ms": 2001}',
                                  '{"type": "screen_delay", "ms": "soon"}', '{"type": "screen_delay"}'])
def test_a_bad_screen_delay_is_one_line(body):
    with pytest.raises(dc.ProtocolError, match="ms") as caught:
        dc.parse_client_message(body)
    assert "\n" not in str(caught.value)


def test_a_switch_timed_in_the_past_of_what_is_rendered_lands_on_the_next_frame_not_rendered():
    t0 = time.time() - 20 / FPS
    timeline = LiveTimeline(Schedule.single("cyberpunk"))
    parts = SessionParts(Rollout(26), timeline, None, None, "demo", 64, 32, stats=lambda: None,
                         frame_at=lambda t: (t - t0) * FPS)
    message = dc.build(dc.SetPreset, name="polar", at=time.time())      # frame 20: sent, and 21..25 rendered
    step = switch_now(parts, message)
    assert step.run(parts, message, step.data).frame == 26
    assert timeline.conditioning_at(26).label() == "polar"


def test_a_quantized_switch_without_a_tempo_and_a_timetag_far_off_are_one_line():
    parts = SessionParts(Rollout(0), LiveTimeline(Schedule.single("cyberpunk")), None, None, "demo", 64, 32,
                         stats=lambda: None, frame_at=lambda t: None)
    with pytest.raises(dc.ProtocolError, match="^preset: quantize 'beat' needs the session's tempo first"):
        switch_now(parts, dc.build(dc.SetPreset, name="polar", quantize="beat"))
    with pytest.raises(dc.ProtocolError, match=r"^preset: at: .* is not within 1 s before and 3600 s after"):
        switch_now(parts, dc.build(dc.SetPreset, name="polar", at=time.time() + 7200))
    with pytest.raises(dc.ProtocolError, match="bpm"):
        dc.parse_client_message('{"type": "tempo", "bpm": 1000}')


# ---- a real studio --------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def studio():
    torch.set_num_threads(1)
    with BackgroundServer(Settings(port=0, max_sessions=2, osc_port=free_udp_port(), admin_token=ADMIN,
                                   warm_text_matching=False)) as server:
        yield server


def first_frame_labelled(viewer: StudioViewer, label: str, after: int) -> int | None:
    return next((m["frame"] for m in viewer.statuses()[after:] if m["label"] == label), None)


def frame_named(viewer: StudioViewer, ack: dict, after: int) -> int:
    """The frame the studio last named for a timed switch: its ack's, or where it was placed again since."""
    again = [m["frame"] for m in viewer.messages[after:]
             if m.get("type") == "timeline" and m.get("reason") == "a timed switch placed again"]
    return again[-1] if again else ack["frame"]


def test_a_quantized_switch_and_a_timetagged_osc_bundle_land_on_the_frames_their_acks_name(studio):
    osc = SimpleUDPClient("127.0.0.1", studio.settings.osc_port)

    async def scenario():
        async with StudioViewer(studio.url, **VIEW) as viewer:
            await viewer.wait_frames(5)
            # the data channel: a tempo, then a switch quantized to the next beat
            mark = len(viewer.messages)
            await viewer.send({"type": "tempo", "bpm": 120})
            await viewer.wait_message("ack", after=mark, request="tempo", on=True)
            sent = len(viewer.statuses())
            await viewer.send({"type": "preset", "name": "polar", "quantize": "beat"})
            ack = await viewer.wait_message("ack", after=mark, request="preset")
            await viewer.wait_until(lambda: first_frame_labelled(viewer, "polar", sent) is not None, 30,
                                    "a polar frame")
            assert first_frame_labelled(viewer, "polar", sent) == frame_named(viewer, ack, mark)

            # OSC: a bundle timed 2 s ahead; the switch is placed ahead (it is not the next frame) and lands there
            import httpx
            async with httpx.AsyncClient(base_url=studio.url, timeout=30) as http:
                body = {"session_id": viewer.session_id}
                assert (await http.put("/api/osc", json=body, headers=AS_ADMIN)).status_code == 200
            mark, sent = len(viewer.messages), len(viewer.statuses())
            now_frame = viewer.statuses()[-1]["frame"]
            bundle = OscBundleBuilder(time.time() + 2.0)
            message = OscMessageBuilder("/alaya/preset")
            message.add_arg("infrared")
            bundle.add_content(message.build())
            osc.send(bundle.build())
            ack = await viewer.wait_message("ack", after=mark, request="preset")
            assert ack["frame"] >= now_frame + 5, (ack, now_frame)      # placed ahead, not applied at once
            await viewer.wait_until(lambda: first_frame_labelled(viewer, "infrared", sent) is not None, 30,
                                    "an infrared frame")
            assert first_frame_labelled(viewer, "infrared", sent) == frame_named(viewer, ack, mark)

            # bad input over OSC: one counted refusal each, and the session goes on
            _, rejected = osc_counts(studio)
            osc.send_message("/alaya/tempo", 1000.0)
            osc.send_message("/alaya/quantize", "sometimes")
            await viewer.wait_until(lambda: osc_counts(studio)[1] >= rejected + 2, 30, "two refusals counted")
            n = len(viewer.frames)
            await viewer.wait_frames(n + 5)
        assert await wait_no_sessions(studio)

    asyncio.run(scenario())
