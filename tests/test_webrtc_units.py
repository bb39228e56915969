"""webrtc/ building blocks: frame stamp, per-session encoders, data-channel protocol, pacing buffer."""

from __future__ import annotations

import asyncio
import fractions
import time

import av
import numpy as np
import pytest

from gbuffer.formats.pictures import convert, rgb24, yuv420p
from gbuffer.input import PlayerInput
from webrtc import protocol as dc
from webrtc.encoders import EncoderSettings, SessionH264Encoder, SessionVp8Encoder
from webrtc.stamp import read_stamp, stamp_index
from webrtc.track import FrameBuffer, OutgoingFrame, SessionVideoTrack


def _picture(rng, w=160, h=96):
    return rng.integers(0, 256, (h, w, 3), dtype=np.uint8)


@pytest.mark.parametrize("index", [0, 1, 637, 40_000, 65_535])
def test_stamp_reads_back_exactly(rng, index):
    assert read_stamp(stamp_index(_picture(rng), index)) == index


def test_unstamped_picture_reads_as_none(rng):
    assert read_stamp(_picture(rng)) is None
    assert read_stamp(np.full((96, 160, 3), 128, np.uint8)) is None


def test_stamp_survives_h264_and_vp8(rng):
    """Through a real encoder at a modest bitrate, every stamped index comes back."""
    for codec_name in ("libx264", "libvpx"):
        codec = av.CodecContext.create(codec_name, "w")
        codec.width, codec.height, codec.pix_fmt = 416, 224, "yuv420p"
        codec.bit_rate = 400_000
        codec.time_base = fractions.Fraction(1, 30)
        decoder = av.CodecContext.create("h264" if codec_name == "libx264" else "vp8", "r")
        read = []
        for i in range(20):
            rgb = stamp_index(_picture(rng, 416, 224), 1000 + i)
            frame = yuv420p(rgb)
            frame.pts = i
            for packet in codec.encode(frame):
                for out in decoder.decode(packet):
                    read.append(read_stamp(rgb24(out)))
        for packet in [*codec.encode(None), None]:  # flush encoder, then decoder
            for out in decoder.decode(packet):
                read.append(read_stamp(rgb24(out)))
        assert read == list(range(1000, 1020)), codec_name


def test_session_encoders_use_the_session_settings():
    settings = EncoderSettings(bitrate=2_000_000, min_bitrate=1_000_000, max_bitrate=4_000_000, fps=24,
                               keyframe_interval=10)
    for encoder in (SessionH264Encoder(settings), SessionVp8Encoder(settings)):
        frame = av.VideoFrame.from_ndarray(np.zeros((96, 160, 3), np.uint8), format="rgb24")
        frame.pts, frame.time_base = 0, fractions.Fraction(1, 90_000)
        assert encoder.last_encode_ms is None
        payloads, _ = encoder.encode(convert(frame, "yuv420p"))
        assert payloads and encoder.last_encode_ms > 0     # what the status reports as encode_ms
        assert encoder.codec.bit_rate == 2_000_000
        assert encoder.codec.gop_size == 10
        # receiver estimates (REMB) move the bitrate only within this session's bounds, not aiortc's
        encoder.target_bitrate = 100_000_000
        assert encoder.target_bitrate == 4_000_000
        encoder.target_bitrate = 10
        assert encoder.target_bitrate == 1_000_000


def test_h264_session_encoder_emits_keyframes_at_the_interval():
    settings = EncoderSettings(bitrate=1_000_000, fps=30, keyframe_interval=15)
    encoder = SessionH264Encoder(settings)
    keyframes = []
    for i in range(60):
        rgb = np.full((96, 160, 3), 90, np.uint8)
        rgb[40:56, 2 * i:2 * i + 16] = 250  # a small moving square: no scene cuts
        frame = av.VideoFrame.from_ndarray(rgb, format="rgb24")
        frame.pts, frame.time_base = i * 3000, fractions.Fraction(1, 90_000)
        for nal in encoder._encode_frame(convert(frame, "yuv420p"), False):
            if nal[0] & 0x1F == 5:  # IDR slice
                keyframes.append(i)
                break
    assert keyframes[:4] == [0, 15, 30, 45]


def test_encoder_settings_scale_with_the_picture():
    small = EncoderSettings.for_session(160, 96, 30)
    big = EncoderSettings.for_session(832, 448, 30)
    assert big.bitrate > small.bitrate >= 600_000
    assert big.bitrate > 1_500_000  # above aiortc's VP8 ceiling: detail at 832x448 needs it
    assert EncoderSettings.for_session(832, 448, 30, bitrate=5_000_000).bitrate == 5_000_000
    assert big.keyframe_interval == 60


@pytest.mark.parametrize("text, match", [
    ("{bad", "not JSON"),
    ("[1, 2]", "JSON object"),
    ('{"type": "teleport"}', "unknown message type 'teleport'"),
    ('{"type": "seek", "frame": -3}', "seek message: frame"),
    ('{"type": "seek"}', "seek message: frame: Field required"),
    ('{"type": "key", "key": "jump", "down": true}', "key message: key"),
    ('{"type": "prompt", "text": ""}', "prompt message: text"),
    ('{"type": "blend", "prompts": []}', "blend message: prompts"),
    ('{"type": "input", "steer": 3}', "input message: steer"),
    ('{"type": "play", "extra": 1}', "play message: extra"),
    ('{"type": "ping", "t": NaN}', "ping message: t"),
    ('{"type": "ping"}', "ping message: t: Field required"),
    ('{"type": "stamp", "on": "yes please"}', "stamp message: on"),
    (b"\xff\xfe", "not UTF-8"),
    ("x" * (dc.MAX_MESSAGE_BYTES + 1), "exceeds"),
])
def test_bad_datachannel_messages_name_the_problem(text, match):
    with pytest.raises(dc.ProtocolError, match=match):
        dc.parse_client_message(text)


def test_good_datachannel_messages_parse():
    msg = dc.parse_client_message('{"type": "blend", "prompts": [{"preset": "volcano", "weight": 2},'
                                  ' {"text": "a foggy harbour"}], "transition": 12}')
    assert msg.transition == 12 and [(p.preset, p.text, p.weight) for p in msg.prompts] == [
        ("volcano", None, 2.0), (None, "a foggy harbour", 1.0)]
    assert dc.parse_client_message('{"type": "seek", "frame": 5}').frame == 5
    assert dc.parse_client_message('{"type": "ping", "t": 1796040954230.5}').t == 1796040954230.5
    assert dc.parse_client_message('{"type": "stamp", "on": false}').on is False


def test_key_state_turns_keys_into_player_input():
    keys = dc.KeyState()
    assert keys.press("up", True) == PlayerInput(throttle=1.0)
    assert keys.press("left", True) == PlayerInput(steer=-1.0, throttle=1.0)
    assert keys.press("right", True) == PlayerInput(steer=0.0, throttle=1.0)
    assert keys.press("left", False) == PlayerInput(steer=1.0, throttle=1.0)
    assert keys.press("space", True).brake == 1.0
    assert keys.press("reset", True).reset is True
    assert keys.press("reset", False).reset is False


def _outgoing(i: int) -> OutgoingFrame:
    video = av.VideoFrame.from_ndarray(np.zeros((16, 16, 3), np.uint8), format="rgb24")
    return OutgoingFrame(i, video, time.perf_counter())


def test_track_paces_at_the_session_rate_with_monotonic_timestamps():
    async def run():
        loop = asyncio.get_running_loop()
        buffer = FrameBuffer(4, loop)
        track = SessionVideoTrack(buffer, fps=50)
        for i in range(4):
            assert buffer.put(_outgoing(i), timeout=0)
        assert not buffer.put(_outgoing(99), timeout=0.01)  # full: the producer waits, nothing queues up
        t0 = time.perf_counter()
        frames = [await track.recv() for _ in range(4)]
        elapsed = time.perf_counter() - t0
        assert 0.05 <= elapsed < 0.5  # 3 periods of 20 ms after the first frame
        pts = [f.pts for f in frames]
        assert pts == sorted(pts) and len(set(pts)) == 4
        assert 1700 <= pts[1] - pts[0] <= 2000  # 20 ms at 90 kHz
        buffer.close()
        from aiortc.mediastreams import MediaStreamError
        with pytest.raises(MediaStreamError):
            await track.recv()
    asyncio.run(run())


def test_late_frames_do_not_burst():
    """A renderer slower than real time gives a lower steady rate, not a burst of catch-up frames."""
    async def run():
        loop = asyncio.get_running_loop()
        buffer = FrameBuffer(1, loop)
        track = SessionVideoTrack(buffer, fps=100)
        sent = []
        for i in range(4):
            loop.call_later(0.05, buffer.put, _outgoing(i), 0)
            await track.recv()
            sent.append(time.perf_counter())
        gaps = np.diff(sent)
        assert gaps.min() > 0.04  # each frame waited for the renderer; none sent back to back
    asyncio.run(run())


def test_a_frame_waits_in_the_hand_over_until_its_slot_so_the_next_render_starts_just_in_time():
    """The track waits for a frame's slot before taking it: until then the frame stays in the (one-frame)
    hand-over, which the producer counts as waiting before it starts the next render (wait_to_render,
    tests/test_just_in_time.py)."""
    async def run():
        loop = asyncio.get_running_loop()
        buffer = FrameBuffer(1, loop)
        track = SessionVideoTrack(buffer, fps=10)                 # a slot every 100 ms
        assert buffer.put(_outgoing(0), timeout=0)
        await track.recv()                                         # frame 0 starts the clock
        assert buffer.put(_outgoing(1), timeout=0)                 # frame 1 rendered early
        t0 = time.perf_counter()
        sent = await track.recv()
        taken = time.perf_counter() - t0
        assert sent.pts > 0
        assert taken >= 0.08, taken         # only at frame 1's slot, not as soon as the track asked for a frame
        assert buffer.queued == 0 and buffer.drained
    asyncio.run(run())


def test_every_client_message_type_has_exactly_one_command():
    from studio.server.commands import COMMANDS, command

    assert sorted(COMMANDS) == sorted(dc.MESSAGE_TYPES)
    assert len(dc.MESSAGE_TYPES) == len(set(dc.MESSAGE_TYPES)) == len(dc.CLIENT_MODELS)
    with pytest.raises(TypeError, match="two commands for 'ping' messages"):
        command("ping")(lambda parts, msg: None)     # a second command is refused where it is declared
    assert COMMANDS["ping"].__name__ == "ping"


def test_server_messages_keep_their_wire_shape():
    """docs/datachannel.md and the page read these keys: optional details are left out, not sent as null."""
    assert dc.Ack(request="loop", on=True).wire() == {"type": "ack", "request": "loop", "on": True}
    assert dc.error_message(dc.ProtocolError("bad", "seek"), "seek").wire() == {
        "type": "error", "message": "bad", "where": "seek", "request": "seek"}
    assert dc.Ended(frame=None, reason="gone").wire() == {"type": "ended", "frame": None, "reason": "gone"}
    hello = dict(session_id="s", source="demo", renderer="reference", width=32, height=16, fps=30, recorded=False,
                 frames=None, live=True, codec=None)
    assert "role" not in dc.Hello(**hello, watch={"key": "k"}).wire()
    assert "watch" not in dc.Hello(**hello, role="watcher").wire()


def test_a_message_built_from_fields_is_checked_like_a_parsed_one():
    assert dc.build(dc.SetPreset, name="polar", transition=8) == dc.parse_client_message(
        '{"type": "preset", "name": "polar", "transition": 8}')
    with pytest.raises(dc.ProtocolError, match=r"^seek message: frame: Input should be greater than or equal to 0"):
        dc.build(dc.Seek, frame=-1)


def test_a_value_out_of_bounds_is_named_against_the_limit():
    """Issue 45, finding 8: the page says what was sent against the limit (words.js), so the refusal names it; the
    limit is MAX_SWITCH_FRAMES, the one the page's Transition field shows (GET /api/ui/config `limits`)."""
    too_long = dc.MAX_SWITCH_FRAMES + 1
    with pytest.raises(dc.ProtocolError) as refused:
        dc.parse_client_message(f'{{"type": "preset", "name": "polar", "transition": {too_long}}}')
    assert refused.value.detail == (f"transition: Input should be less than or equal to {dc.MAX_SWITCH_FRAMES} "
                                    f"(got {too_long})")
    dc.parse_client_message(f'{{"type": "preset", "name": "polar", "transition": {dc.MAX_SWITCH_FRAMES}}}')
