"""What an engine knows of each frame reaches the studio (gbuffer/feed/meta.py): a meta message before its frame,
checked in one line when it is wrong; and a quick reset tap survives the release that follows it within a frame."""

from __future__ import annotations

import asyncio
import json
import threading

import numpy as np
import pytest
import torch
from websockets.sync.client import connect

from gbuffer.feed import FeedError, Hello, encode_frame
from gbuffer.feed.client import FeedClient
from gbuffer.feed.meta import MAX_META_BYTES, META_HEADER, META_MAGIC, decode_meta, encode_meta
from gbuffer.formats import write_npy_windows
from gbuffer.frame import GBufferFrame
from gbuffer.input import PlayerInput, newer_input
from gbuffer.viewpoint import CAMERA_KEY, Viewpoint
from helpers.waiting import wait_until
from renderer.reference.synthetic import synthetic_gbuffer
from studio.server import Settings
from studio.server.background import BackgroundServer
from webrtc.client import StudioViewer

TOKEN = "meta-token"
CAMERA = Viewpoint(np.eye(4), np.eye(4)).to_meta()


def _meta(body: bytes, index: int = 3) -> bytes:
    return META_HEADER.pack(META_MAGIC, 1, index) + body


def _frame(index: int, meta: dict | None = None) -> GBufferFrame:
    return GBufferFrame(index, index / 30, np.zeros((5, 16, 32, 3), np.uint8), meta or {})


def test_meta_round_trips_with_only_its_json_values():
    meta = {"position": [1.0, 2.0, 0.5], "speed": 3.25, "engine": "panda3d", "cruise": False, CAMERA_KEY: CAMERA,
            "pixels": np.zeros(3)}                     # an array is not JSON: left out, the rest goes
    index, back = decode_meta(encode_meta(7, meta))
    assert index == 7 and back == {k: v for k, v in meta.items() if k != "pixels"}


def test_meta_past_its_cap_is_not_sent_and_the_frame_still_goes():
    assert encode_meta(1, {"notes": "x" * MAX_META_BYTES}) is None
    assert encode_meta(1, {"pixels": np.zeros(3)}) is None


@pytest.mark.parametrize("message, match", [
    (META_MAGIC + b"\x01", "shorter than its 9-byte header"),
    (META_HEADER.pack(META_MAGIC, 9, 3) + b"{}", "bad meta header"),
    (_meta(b"{" + b" " * MAX_META_BYTES + b"}"), f"frame 3: meta: {MAX_META_BYTES + 2} bytes; at most"),
    (_meta(b"\xff\xfe"), "frame 3: meta: not UTF-8"),
    (_meta(b"{speed: 1}"), "frame 3: meta: not JSON"),
    (_meta(b"[1, 2]"), "frame 3: meta: must be a JSON object, got list"),
    (_meta(b'{"speed": {"now": NaN}}'), "frame 3: meta: holds NaN, which is not a finite number"),
    (_meta(b"[" * 5000 + b"]" * 2000), "nested too deeply|not JSON"),
    (_meta(json.dumps({CAMERA_KEY: {"view": [[1, 0], [0, 1]], "projection": 1}}).encode()),
     "frame 3: meta: camera metadata must hold (finite )?4x4"),
])
def test_bad_meta_gets_one_line_naming_what_is_wrong(message, match):
    with pytest.raises(FeedError, match=match) as err:
        decode_meta(message)
    assert "\n" not in str(err.value)


def test_a_reset_waiting_to_be_taken_survives_the_release_after_it():
    press, release = PlayerInput(reset=True), PlayerInput(steer=0.5)
    assert newer_input(press, release) == PlayerInput(steer=0.5, reset=True)
    assert newer_input(None, release) == release and newer_input(release, press) == press
    assert newer_input(PlayerInput(), release) == release


# ---- against a studio ------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def studio(tmp_path_factory):
    torch.set_num_threads(1)
    data = tmp_path_factory.mktemp("data")
    write_npy_windows((synthetic_gbuffer(160, 96, i / 30, i) for i in range(8)), data / "drive")
    with BackgroundServer(Settings(port=0, max_sessions=2, data_dir=data, token=TOKEN)) as server:
        yield server


def _url(studio) -> str:
    return f"{studio.ws_url}/api/engine/feed"


def test_an_engines_meta_reaches_the_studio_with_its_frame(studio):
    with FeedClient(_url(studio), name="meta-car", width=32, height=16, fps=30, token=TOKEN) as client:
        assert client.welcome["meta"] is True                      # offered in the hello, taken by the studio
        feed = studio.app.state.feeds.get("meta-car")
        client.send_frame(_frame(0, {"position": [4.0, 5.0, 0.0], "speed": 2.5, "source": "engine's own"}))
        got = wait_until(lambda: feed.wait_frame(0, 1), 20, "the frame never arrived")
        assert got.meta["position"] == [4.0, 5.0, 0.0] and got.meta["speed"] == 2.5
        assert got.meta["source"] == "feed:meta-car"               # the studio's own entries win
        client.send_frame(_frame(1))                               # no meta: the frame carries only the studio's
        got = wait_until(lambda: feed.wait_frame(1, 1), 20, "the second frame never arrived")
        assert "position" not in got.meta


def _closed_by(studio, hello: Hello, *messages: bytes) -> tuple[int, str]:
    with connect(_url(studio), additional_headers={"Authorization": f"Bearer {TOKEN}"}) as ws:
        ws.send(hello.to_json())
        assert json.loads(ws.recv(timeout=10))["type"] == "welcome"
        for message in messages:
            ws.send(message)
        ws.recv(timeout=20)          # the close: websockets raises ConnectionClosed with its frame
    raise AssertionError("the studio answered instead of closing the feed")


@pytest.mark.parametrize("hello, messages, reason", [
    (Hello("bad-meta", 32, 16, 30.0, meta=True), [_meta(b"[1]")], "frame 3: meta: must be a JSON object"),
    (Hello("two-meta", 32, 16, 30.0, meta=True), [_meta(b"{}", 3), _meta(b"{}", 4)],
     "frame 4: a second meta message before frame 3 arrived"),
    (Hello("late-meta", 32, 16, 30.0, meta=True), [_meta(b"{}", 3), encode_frame(_frame(5))],
     "a meta message for frame 3 came before frame 5"),
    (Hello("no-meta", 32, 16, 30.0), [_meta(b"{}", 3)], "shorter than its 22-byte header"),  # never offered
])
def test_a_bad_meta_message_closes_its_feed_with_one_line(studio, hello, messages, reason):
    from websockets.exceptions import ConnectionClosed

    with pytest.raises(ConnectionClosed) as closed:
        _closed_by(studio, hello, *messages)
    assert closed.value.rcvd is not None and reason in closed.value.rcvd.reason, closed.value.rcvd
    wait_until(lambda: hello.name not in studio.app.state.feeds.names(), 20, "the bad feed stayed connected")


def test_a_quick_reset_tap_reaches_the_engine_with_its_release(studio):
    """R pressed and released before the engine reads its input (one frame at 30 fps): the reset is not lost."""
    with FeedClient(_url(studio), name="tapped", width=32, height=16, fps=30, token=TOKEN) as client:
        stop = threading.Event()

        def engine() -> None:                                      # frames at 30 fps; its input is not read here
            i = 0
            while not stop.wait(1 / 30):
                client.send_frame(_frame(i))
                i += 1

        async def tap() -> None:
            async with StudioViewer(studio.url, source="feed:tapped", size="32x16", keep_pixels=False) as viewer:
                await viewer.wait_frames(3)
                for down in (True, False):
                    await viewer.send({"type": "key", "key": "reset", "down": down})
                await asyncio.to_thread(wait_until, lambda: client.inputs_received >= 2, 20,
                                        "the press and the release to reach the engine")
        sender = threading.Thread(target=engine, daemon=True)
        sender.start()
        try:
            asyncio.run(tap())
        finally:
            stop.set()
            sender.join(5)
        taken = client.take_input()
        assert taken is not None and taken.reset, taken
        assert client.take_input() is None                         # taken once
