"""The engine feed: wire protocol checks, and external engines connected to a running studio."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
import zlib

import httpx
import numpy as np
import pytest
import torch
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

from gbuffer.feed import FeedError, FeedLimits, Hello, decode_frame, encode_frame, parse_hello
from gbuffer.feed.client import FeedClient, stream_source
from gbuffer.feed.protocol import FRAME_HEADER, FRAME_MAGIC
from gbuffer.feed.source import Feed
from gbuffer.formats import write_npy_windows
from gbuffer.frame import GBufferFrame
from renderer.reference.synthetic import synthetic_gbuffer
from studio.server import Settings
from studio.server.background import BackgroundServer
from helpers.waiting import wait_until
from webrtc.client import StudioViewer

TOKEN = "s3cret-token"
HELLO = Hello("kart", 32, 16, 30.0)


def _frame(rng, index=7, w=32, h=16) -> GBufferFrame:
    return GBufferFrame(index, index / 30, rng.integers(0, 256, (5, h, w, 3), dtype=np.uint8))


# ---- protocol -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("compression", ["none", "zlib"])
def test_frames_round_trip(rng, compression):
    frame = _frame(rng)
    back = decode_frame(encode_frame(frame, compression), Hello("kart", 32, 16, 30.0, compression))
    assert back.index == 7 and back.timestamp == pytest.approx(7 / 30, abs=1e-6)
    np.testing.assert_array_equal(back.data, frame.data)


def _header(w=32, h=16, compression=0, magic=FRAME_MAGIC):
    return FRAME_HEADER.pack(magic, 1, compression, w, h, 0, 0)


@pytest.mark.parametrize("message, match", [
    (b"AGB", "shorter than its"),
    (_header(magic=b"NOPE") + bytes(5 * 16 * 32 * 3), "bad frame header"),
    (_header(w=64) + bytes(5 * 16 * 64 * 3), "frame is 64x16 but the hello said 32x16"),
    (_header() + bytes(100), "payload has 100 bytes"),
    (_header(compression=9) + bytes(10), "unknown compression id 9"),
])
def test_malformed_frames_are_rejected_with_a_reason(message, match):
    with pytest.raises(FeedError, match=match):
        decode_frame(message, HELLO)


ZLIB_HELLO = Hello("kart", 32, 16, 30.0, "zlib")


@pytest.mark.parametrize("message, match", [
    (_header(compression=1) + zlib.compress(bytes(10 * 5 * 16 * 32 * 3)), "inflates beyond one"),
    (_header(compression=1) + b"not zlib at all", "zlib payload is corrupt"),
])
def test_malformed_zlib_frames_are_rejected_with_a_reason(message, match):
    with pytest.raises(FeedError, match=match):
        decode_frame(message, ZLIB_HELLO)


def test_a_frame_whose_header_disagrees_with_the_hello_is_refused_before_inflating():
    # the event loop decodes "none" feeds in place, so a zlib frame on such a feed must never be inflated there
    lying = _header(compression=1) + zlib.compress(bytes(5 * 16 * 32 * 3))
    with pytest.raises(FeedError, match="frame header says zlib but the hello said none") as raised:
        decode_frame(lying, HELLO)
    assert raised.value.code == 1003
    with pytest.raises(FeedError, match="frame header says none but the hello said zlib"):
        decode_frame(_header() + bytes(5 * 16 * 32 * 3), ZLIB_HELLO)


def _hello(**fields) -> str:
    return json.dumps({"type": "hello", "protocol": 1, "name": "kart", "width": 416, "height": 224, "fps": 30,
                       **fields})


@pytest.mark.parametrize("text, match", [
    ("not json", "not JSON"),
    ('{"type": "frame"}', "first message must be"),
    (b"\x00\x01", "got binary data"),
    (None, "got an empty message"),      # a websocket message with neither text nor bytes
    (_hello(protocol=3), "protocol 3 is not supported; this studio speaks 1 and 2"),
    (_hello(output={"format": "jpeg"}), "hello.output: .output. needs protocol 2"),
    (_hello(protocol=2, output=[1]), "hello.output"),
    (_hello(name="../x"), "hello.name"),
    (_hello(width="416"), "hello.width"),
    (_hello(width=4000, height=4000), "exceeds the cap"),
    (_hello(fps=500), "hello.fps"),
    (_hello(compression="lzma"), "hello.compression"),
])
def test_bad_hellos_are_rejected(text, match):
    with pytest.raises(FeedError, match=match):
        parse_hello(text, FeedLimits(max_pixels=1920 * 1080, max_fps=120))


def test_a_good_hello_parses():
    hello = parse_hello(_hello(compression="zlib"))
    assert (hello.name, hello.width, hello.height, hello.fps, hello.compression) == ("kart", 416, 224, 30.0, "zlib")


# ---- against a studio ------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def studio(tmp_path_factory):
    torch.set_num_threads(1)
    data = tmp_path_factory.mktemp("data")
    write_npy_windows((synthetic_gbuffer(160, 96, i / 30, i) for i in range(32)), data / "drive")
    settings = Settings(port=0, max_sessions=3, data_dir=data, token=TOKEN)
    with BackgroundServer(settings) as server:
        yield server


def feed_url(studio) -> str:
    return f"{studio.ws_url}/api/engine/feed"


def wait_feed(studio, name, present=True, timeout=20.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if (name in studio.app.state.feeds.names()) == present:
            return True
        time.sleep(0.05)
    return False


def closed_reason(ws) -> tuple[int, str]:
    with pytest.raises(ConnectionClosed) as closed:
        for _ in range(100):
            ws.recv(timeout=10)
    return close_frame(closed.value)


def close_frame(closed: ConnectionClosed) -> tuple[int, str]:
    assert closed.rcvd is not None, f"the server dropped the feed without a close frame: {closed}"
    return closed.rcvd.code, closed.rcvd.reason


def flood(ws, frame: bytes, count: int) -> tuple[int, str]:
    """Send `count` frames as fast as possible. The server may close the feed part-way (that is the point): a
    send after its close raises, and the close frame's code and reason are the outcome either way."""
    try:
        for _ in range(count):
            ws.send(frame)
    except ConnectionClosed as closed:
        return close_frame(closed)
    return closed_reason(ws)


def test_feeds_need_the_token(studio):
    client = FeedClient(feed_url(studio), name="intruder", width=32, height=16, fps=30)
    with pytest.raises(FeedError, match="token is required"):
        client.connect()
    client = FeedClient(feed_url(studio), name="friend", width=32, height=16, fps=30, token=TOKEN)
    assert client.connect()["source"] == "feed:friend"
    client.close()


def test_an_external_engine_process_streams_frames_and_receives_inputs(studio):
    engine = subprocess.Popen(
        [sys.executable, "-m", "studio.cli", "engine", "--connect", feed_url(studio), "--name", "kart",
         "--size", "160x96", "--fps", "30", "--frames", "240", "--token", TOKEN],
        stderr=subprocess.PIPE, text=True)
    try:
        assert wait_feed(studio, "kart"), "the engine never connected"

        async def scenario():
            async with StudioViewer(studio.url, source="feed:kart", size="160x96", stamp=True) as viewer:
                hello = await viewer.wait_message("hello")
                assert hello["live"] and hello["source"] == "feed:kart"
                await viewer.wait_frames(30)
                for key, down in [("up", True), ("left", True), ("left", False), ("up", False)]:
                    await viewer.send({"type": "key", "key": key, "down": down})
                stamps = [f.stamp for f in viewer.frames]
                assert stamps == sorted(stamps) and len(set(stamps)) == len(stamps)
                # the engine stops after its frames: the dead feed ends the session within seconds
                ended = await viewer.wait_message("ended", timeout=30)
                assert ended["reason"]
                deadline = time.monotonic() + 10
                while studio.sessions and time.monotonic() < deadline:
                    await asyncio.sleep(0.1)
                assert not studio.sessions
        asyncio.run(scenario())
        _, err = engine.communicate(timeout=30)
    finally:
        engine.kill()
    assert engine.returncode == 0, err
    inputs = int(err.split("frames; ")[1].split(" inputs")[0])
    assert inputs >= 4, err
    assert wait_feed(studio, "kart", present=False)


def test_malformed_feeds_are_closed_without_disturbing_a_running_session(studio):
    async def scenario():
        async with StudioViewer(studio.url, source="drive", size="160x96", stamp=True,
                                keep_pixels=False) as viewer:
            await viewer.wait_frames(5)
            headers = {"Authorization": f"Bearer {TOKEN}"}

            def attack() -> list[tuple[int, str]]:
                reasons = []
                with connect(feed_url(studio), additional_headers=headers) as ws:
                    ws.send("hello?")
                    reasons.append(closed_reason(ws))
                with connect(feed_url(studio), additional_headers=headers) as ws:
                    ws.send(Hello("junk", 32, 16, 30.0).to_json())
                    json.loads(ws.recv(timeout=10))
                    ws.send(b"\x00" * 64)
                    reasons.append(closed_reason(ws))
                with connect(feed_url(studio), additional_headers=headers) as ws:
                    ws.send(Hello("flood", 32, 16, 5.0).to_json())
                    ws.recv(timeout=10)
                    frame = encode_frame(GBufferFrame(0, 0.0, np.zeros((5, 16, 32, 3), np.uint8)))
                    reasons.append(flood(ws, frame, 30))
                return reasons

            n = len(viewer.frames)
            reasons = await asyncio.to_thread(attack)
            assert reasons[0][0] == 4400 and "hello" in reasons[0][1]
            assert reasons[1][0] == 1003 and "bad frame header" in reasons[1][1]
            assert reasons[2][0] == 4429 and "frames a second beyond a burst" in reasons[2][1]
            await viewer.wait_frames(n + 15)  # the session streamed on
            assert not studio.app.state.feeds.names()
    asyncio.run(scenario())


def test_feed_client_library_with_a_recorded_source(studio, tmp_path):
    frames = [synthetic_gbuffer(64, 32, i / 30, i) for i in range(10)]
    from gbuffer.formats import open_sequence
    write_npy_windows(frames, tmp_path / "seq")
    source = open_sequence([tmp_path / "seq"])
    with FeedClient(feed_url(studio), name="replay", width=64, height=32, fps=60, token=TOKEN) as client:
        sent = stream_source(source, client)
        # sent is not yet received: the last frames may still be in flight when stream_source returns
        feeds = wait_until(lambda: [f for f in httpx.get(f"{studio.url}/api/feeds", timeout=60).json()
                                    if f["frames"] == 10],
                           20, "the studio to receive all 10 frames")
    assert sent == 10
    assert feeds == [{"name": "replay", "source": "feed:replay", "width": 64, "height": 32, "fps": 60.0,
                      "frames": 10, "subscribers": 0}]


def test_the_rate_cap_takes_a_backlog_after_a_pause_but_closes_a_flood():
    """A server that stopped reading for a second (a session starting on a busy machine) then reads the queued
    frames at once: that is not a flood. Sixty frames at once at 30 fps are; the cap names the rate it holds."""
    feed = Feed(Hello("engine", 32, 16, 30.0), send=lambda message: None)
    frame = GBufferFrame(0, 0.0, np.zeros((5, 16, 32, 3), np.uint8))
    for _ in range(45):                     # 1.5 s of frames queued behind a pause
        feed.push(frame)
    assert feed.frames == 45
    with pytest.raises(FeedError, match="45 frames a second beyond a burst of 92"):
        for _ in range(60):
            feed.push(frame)
    assert feed.frames == 92                # the burst, and not one frame more
