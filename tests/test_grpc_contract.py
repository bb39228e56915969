"""The gRPC contract (gbuffer/feed/grpc/engine_feed.proto): the committed stubs are what the .proto makes, and its
messages carry a GBufferFrame both ways, refusing a bad one in one line that names the field."""

from __future__ import annotations

import zlib

import numpy as np
import pytest

pytest.importorskip("grpc_tools", reason="the engines extra")

from gbuffer.feed.grpc import engine_feed_pb2 as pb  # noqa: E402
from gbuffer.feed.grpc.generate import HERE, generate  # noqa: E402
from gbuffer.feed.grpc.messages import frame_message, open_message, parse_frame, parse_open  # noqa: E402
from gbuffer.feed.protocol import FeedError, FeedLimits, Hello  # noqa: E402
from gbuffer.frame import GBufferFrame  # noqa: E402

HELLO = Hello("kart", 32, 16, 30.0)
PLANE = 16 * 32 * 3


def test_the_committed_stubs_are_what_the_proto_generates():
    for name, text in generate().items():
        assert (HERE / name).read_text() == text, (
            f"{name} differs from what grpcio-tools makes of engine_feed.proto: python -m gbuffer.feed.grpc.generate")


def _frame(rng, index=7, rgb=False) -> GBufferFrame:
    return GBufferFrame(index, index / 30, rng.integers(0, 256, (5, 16, 32, 3), dtype=np.uint8),
                        rgb=rng.integers(0, 256, (16, 32, 3), dtype=np.uint8) if rgb else None)


@pytest.mark.parametrize("compression", ["none", "zlib"])
@pytest.mark.parametrize("rgb", [False, True])
def test_frames_round_trip_channel_by_channel(rng, compression, rgb):
    frame = _frame(rng, rgb=rgb)
    hello = Hello("kart", 32, 16, 30.0, compression, rgb=rgb)
    wire = pb.EngineMessage.FromString(frame_message(frame, compression, rgb).SerializeToString())
    back = parse_frame(wire.frame, hello)
    assert back.index == 7 and back.timestamp == pytest.approx(7 / 30, abs=1e-6)
    assert back.meta == {"source": "feed:kart"}
    np.testing.assert_array_equal(back.data, frame.data)
    if rgb:
        np.testing.assert_array_equal(back.rgb, frame.rgb)
    else:
        assert back.rgb is None


def test_the_input_a_frame_was_simulated_with_is_kept_in_its_meta(rng):
    message = frame_message(_frame(rng)).frame
    message.input.CopyFrom(pb.PlayerInput(steer=-3.0, throttle=0.5, handbrake=True))
    assert parse_frame(message, HELLO).meta["input"] == {"steer": -1.0, "throttle": 0.5, "brake": 0.0,
                                                          "reset": False, "handbrake": True}


def test_the_engines_meta_travels_in_meta_json_and_the_studios_own_entries_win(rng):
    frame = _frame(rng)
    frame.meta.update(position=[1.0, 2.0, 0.5], engine="panda3d", source="the engine's", pixels=np.zeros(2))
    back = parse_frame(pb.EngineMessage.FromString(frame_message(frame).SerializeToString()).frame, HELLO)
    assert back.meta == {"position": [1.0, 2.0, 0.5], "engine": "panda3d", "source": "feed:kart"}


def _bad_frame(rng, change) -> pb.Frame:
    message = frame_message(_frame(rng)).frame
    change(message)
    return message


@pytest.mark.parametrize("change, hello, line", [
    (lambda m: setattr(m.gbuffer, "depth", bytes(100)), HELLO,
     "frame 7: frame.gbuffer.depth: 100 bytes; a 32x16 plane (H, W, 3) has 1536"),
    (lambda m: m.ClearField("gbuffer"), HELLO, "frame 7: frame.gbuffer: missing"),
    (lambda m: setattr(m.gbuffer, "albedo", b""), HELLO, "frame 7: frame.gbuffer.albedo: 0 bytes"),
    (lambda m: setattr(m, "rgb", bytes(PLANE)), HELLO, "frame 7: frame.rgb: set, but the feed was opened without rgb"),
    (lambda m: None, Hello("kart", 32, 16, 30.0, rgb=True), "frame 7: frame.rgb: 0 bytes"),
    (lambda m: None, Hello("kart", 32, 16, 30.0, "zlib"),     # raw planes where the open said zlib
     "frame 7: frame.gbuffer.albedo: zlib data is corrupt"),
    (lambda m: setattr(m, "meta_json", b"[1, 2]"), HELLO, "frame 7: meta: must be a JSON object, got list"),
    (lambda m: setattr(m, "meta_json", b'{"speed": Infinity}'), HELLO, "frame 7: meta: holds Infinity"),
    (lambda m: setattr(m, "meta_json", b"{" + bytes(9000) + b"}"), HELLO, "frame 7: meta: 9002 bytes; at most 8192"),
])
def test_bad_frames_are_refused_naming_the_field(rng, change, hello, line):
    with pytest.raises(FeedError) as refused:
        parse_frame(_bad_frame(rng, change), hello)
    assert str(refused.value).startswith(line)


def test_a_zlib_plane_that_inflates_beyond_one_plane_is_refused_unread(rng):
    message = frame_message(_frame(rng), "zlib").frame
    message.gbuffer.roughness = zlib.compress(bytes(1000 * PLANE))
    with pytest.raises(FeedError, match=r"frame\.gbuffer\.roughness: inflates beyond one 32x16 plane"):
        parse_frame(message, Hello("kart", 32, 16, 30.0, "zlib"))


def _open(**fields) -> pb.Open:
    message = open_message(Hello("kart", 416, 224, 30.0)).open
    for name, value in fields.items():
        setattr(message, name, value)
    return message


@pytest.mark.parametrize("fields, line", [
    ({"name": ""}, "open.name: String should match pattern"),
    ({"name": "../x"}, "open.name: String should match pattern"),
    ({"width": 0}, "open.width: Input should be greater than or equal to 8"),
    ({"width": 4000, "height": 4000}, "open: 4000x4000 exceeds the cap of 2073600 pixels"),
    ({"fps": 0.0}, "open.fps"),
    ({"fps": 500.0}, "open.fps: 500.0 is not a frame rate in (0, 120]"),
    ({"compression": 7}, "open.compression: 7 is not one of 0 (none), 1 (zlib)"),
])
def test_bad_opens_are_refused_naming_the_field(fields, line):
    with pytest.raises(FeedError) as refused:
        parse_open(_open(**fields), FeedLimits(max_pixels=1920 * 1080, max_fps=120))
    assert str(refused.value).startswith(line)


def test_a_good_open_is_the_feed_hello():
    hello = parse_open(_open(compression=pb.COMPRESSION_ZLIB, rgb=True))
    assert hello == Hello("kart", 416, 224, 30.0, "zlib", rgb=True)
