"""Feed protocol 2 (issue 27): an engine asks for its own session in its hello and gets the styled frames back
on the same WebSocket, tagged with the G-buffer frame each came from; it switches styles with the data channel's
messages, browsers watch its session, and bad messages are refused in one line while another engine streams on."""

from __future__ import annotations

import asyncio
import json
import threading

import httpx
import numpy as np
import pytest
import torch
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

from gbuffer.feed.client import FeedClient
from gbuffer.feed.protocol import Hello, decode_styled, encode_frame
from gbuffer.frame import GBufferFrame
from helpers.raw_engine import RawEngine
from helpers.waiting import wait_until
from renderer.reference.synthetic import synthetic_gbuffer
from studio.server import Settings
from studio.server.background import BackgroundServer
from webrtc.client import WhepViewer

TOKEN = "return-token"
W, H = 64, 32


@pytest.fixture(scope="module")
def studio():
    torch.set_num_threads(1)
    with BackgroundServer(Settings(port=0, max_sessions=3, token=TOKEN, warm_text_matching=False)) as server:
        yield server


def url(studio) -> str:
    return f"{studio.ws_url}/api/engine/feed"


def engine(studio, name: str, w: int = W, h: int = H, **output) -> FeedClient:
    return FeedClient(url(studio), name=name, width=w, height=h, fps=30, token=TOKEN, output=output)


def lockstep(client: FeedClient, indices, w: int = W, h: int = H) -> list:
    """Send each frame once the previous one came back styled (one frame in flight)."""
    back = []
    frames = client.frames(timeout=30)
    for i in indices:
        client.send_frame(synthetic_gbuffer(w, h, i / 30, i))
        for styled in frames:
            if styled.index == i:
                back.append(styled)
                break
        else:
            raise AssertionError(f"frame {i} never came back; closed: {client.close_reason}")
    return back


def closed_with(ws) -> tuple[int, str]:
    with pytest.raises(ConnectionClosed) as closed:
        for _ in range(1000):
            ws.recv(timeout=30)
    return closed.value.rcvd.code, closed.value.rcvd.reason


def test_an_engine_gets_its_styled_frames_back_and_browsers_watch_its_session(studio):
    with engine(studio, "game", prompt="volcano", format="rgb24") as client:
        welcome = client.welcome
        assert welcome["protocol"] == 2 and welcome["source"] == "feed:game"
        session = studio.sessions[welcome["session_id"]]          # a session like a visitor's, with its key
        assert session.owner_key == welcome["owner_key"] and (welcome["width"], welcome["height"]) == (W, H)
        assert welcome["watch"] == f"/studio/watch/{session.id}?key={welcome['watch_key']}"
        info = httpx.get(f"{studio.url}/api/sessions/{session.id}",     # its REST routes take the owner key
                         headers={"Authorization": f"Bearer {welcome['owner_key']}"}, timeout=30)
        assert info.status_code == 200 and info.json()["source"] == "feed:game", info.text
        assert httpx.get(f"{studio.url}/api/sessions/{session.id}", timeout=30).status_code == 401
        back = lockstep(client, range(10, 20))
        assert [f.index for f in back] == list(range(10, 20))
        assert all(f.format == "rgb24" and f.rgb().shape == (H, W, 3) and f.missed == 0 for f in back)
        assert 0 < back[0].render_ms <= back[0].studio_ms      # the studio's share holds the render
        gbuffer_albedo = synthetic_gbuffer(W, H, 19 / 30, 19).data[0]
        assert np.abs(back[-1].rgb().astype(int) - gbuffer_albedo).mean() > 5   # styled, not the albedo echoed

        async def watch() -> int:      # a browser-side WebRTC player on the watch key, while the engine streams
            viewer = WhepViewer(studio.url, session.id, welcome["watch_key"], keep_pixels=False)
            async with viewer:
                await viewer.wait_frames(5, timeout=60)
                return len(viewer.frames)
        stop = threading.Event()

        def keep_streaming() -> None:
            i = 100
            while not stop.wait(1 / 30) and client.connected:
                client.send_frame(synthetic_gbuffer(W, H, i / 30, i))
                i += 1
        streamer = threading.Thread(target=keep_streaming, daemon=True)
        streamer.start()
        try:
            assert asyncio.run(watch()) >= 5
        finally:
            stop.set()
            streamer.join(5)
    wait_until(lambda: session.id not in studio.sessions, 30, "the engine's session to end with its feed")


def test_control_messages_switch_styles_and_bad_ones_are_answered_not_fatal(studio):
    with engine(studio, "switcher", prompt="cyberpunk", format="jpeg", quality=90) as client:
        before = lockstep(client, [0])[0]
        assert before.format == "jpeg" and before.rgb().shape == (H, W, 3)
        ack = client.control({"type": "preset", "name": "polar"})
        assert ack["type"] == "ack" and ack["request"] == "preset" and ack["label"] == "polar", ack
        error = client.control({"type": "preset", "name": "no-such-style"})
        assert error["type"] == "error" and "no-such-style" in error["message"], error
        assert client.control({"type": "blend", "prompts": "x"})["type"] == "error"
        # the switch applies from the next chunk: the same G-buffer frame comes back in the new style
        after = lockstep(client, [0, 0])[-1]
        assert np.abs(after.rgb().astype(int) - before.rgb().astype(int)).mean() > 5
        assert client.connected


def test_a_protocol_1_engine_is_unchanged_and_gets_no_frames_back(studio):
    with FeedClient(url(studio), name="classic", width=W, height=H, fps=30, token=TOKEN) as client:
        assert client.welcome["protocol"] == 1 and "session_id" not in client.welcome
        client.send_frame(synthetic_gbuffer(W, H, 0, 0))
        wait_until(lambda: studio.app.state.feeds.get("classic").frames == 1, 20, "the frame to arrive")
        assert not any(s.source_name == "feed:classic" for s in studio.sessions.values())


@pytest.mark.parametrize("output, match", [
    ({"format": "png"}, "output.format"),
    ({"size": "33x16"}, "size 33x16"),
    ({"renderer": "nope"}, "unknown renderer 'nope'"),
    ({"prompt": "volcano", "schedule": "0: polar"}, "give 'schedule' or 'prompt', not both"),
])
def test_bad_output_requests_close_in_one_line_while_another_engine_streams_on(studio, output, match):
    with engine(studio, "steady") as steady:
        lockstep(steady, [0])
        with connect(url(studio), additional_headers={"Authorization": f"Bearer {TOKEN}"}) as ws:
            ws.send(json.dumps({"type": "hello", "protocol": 2, "name": "bad", "width": W, "height": H, "fps": 30,
                                "output": output}))
            code, reason = closed_with(ws)
        assert code == 4400 and match in reason and "\n" not in reason, reason
        assert [f.index for f in lockstep(steady, [1, 2, 3])] == [1, 2, 3]
    wait_until(lambda: "bad" not in studio.app.state.feeds.names(), 20, "the refused feed to go")


def test_a_bad_frame_on_a_return_path_closes_that_engine_only(studio):
    with engine(studio, "steady2") as steady:
        lockstep(steady, [0])
        with connect(url(studio), additional_headers={"Authorization": f"Bearer {TOKEN}"}) as ws:
            ws.send(Hello("broken", W, H, 30.0, protocol=2, output={}).to_json())
            assert json.loads(ws.recv(timeout=30))["type"] == "welcome"
            ws.send(b"\x00" * 64)
            code, reason = closed_with(ws)
        assert code == 1003 and "bad frame header" in reason, reason
        assert [f.index for f in lockstep(steady, [1, 2])] == [1, 2]


def test_an_engine_that_stops_reading_stalls_nothing_and_hears_what_it_missed(studio):
    """The stalled engine sends big raw frames and reads none: the socket fills up, its session keeps rendering
    (latest frame wins), another engine streams on, and once it reads again the frames say how many it missed."""
    w, h, count = 416, 224, 50           # 280 KB a styled frame: some 14 MB nobody reads, past the socket's buffers
    stalled = RawEngine(studio, TOKEN)
    try:
        stalled.send(Hello("stalled", w, h, 30.0, protocol=2, output={"format": "rgb24"}).to_json())
        welcome = json.loads(stalled.recv())
        session = studio.sessions[welcome["session_id"]]
        with engine(studio, "reader") as reader:
            picture = synthetic_gbuffer(w, h).data
            for i in range(count):          # each frame rendered (the session waits for none of its sends)
                stalled.send(encode_frame(GBufferFrame(i, i / 30, picture)))
                wait_until(lambda i=i: session.latest_frame is not None and session.latest_frame.gbuffer.index == i,
                           30, f"the stalled engine's session to render frame {i}", poll=0.005)
                if i % 5 == 0:
                    assert [f.index for f in lockstep(reader, [i])] == [i]
        missed, last = 0, -1
        while last < count - 1:
            message = stalled.recv()
            if isinstance(message, bytes):
                styled = decode_styled(message)
                assert styled.index > last
                missed, last = missed + styled.missed, styled.index
        assert missed > 0
    finally:
        stalled.close()


def test_a_full_studio_refuses_a_return_path_in_one_line():
    with BackgroundServer(Settings(port=0, max_sessions=1, warm_text_matching=False)) as small:
        first = FeedClient(f"{small.ws_url}/api/engine/feed", name="first", width=W, height=H, fps=30, output={})
        with first:
            lockstep(first, [0])
            with connect(f"{small.ws_url}/api/engine/feed") as ws:
                ws.send(Hello("second", W, H, 30.0, protocol=2, output={}).to_json())
                code, reason = closed_with(ws)
            assert code == 1013 and "studio full" in reason, reason
            assert [f.index for f in lockstep(first, [1])] == [1]
