"""Fuzzed wire input: data-channel messages (parser and a running session), engine-feed hellos and frames,
WebRTC offers posted to a running studio, WHEP offers and watcher messages on a watched session, and credentials
on its owner routes. Each gives a clear error (ProtocolError / FeedError / HTTP 4xx JSON) or a valid result; a
live session survives every message."""

from __future__ import annotations

import asyncio
import json
import threading
import time
import zlib
from urllib.parse import quote

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

from gbuffer.feed.protocol import FRAME_HEADER, FRAME_MAGIC, FeedError, FeedLimits, Hello, decode_frame, parse_hello
from gbuffer.formats import open_sequence, write_npy_windows
from helpers.fuzz import fuzz_settings, outcome
from helpers.loop import LoopThread
from helpers.watch import recvonly_offer_sdp, start_owner
from prompt_presets import REPORT_STYLES
from renderer.reference import ReferenceRenderer
from renderer.reference.synthetic import synthetic_gbuffer
from timeline.schedule import Schedule
from studio.server import Settings
from studio.server.background import BackgroundServer
from studio.server.planner import SessionPlan
from studio.server.session import LiveSession
from webrtc.client import WhepViewer
from webrtc.protocol import KEYS, MESSAGE_TYPES, ProtocolError, parse_client_message

scalars = st.none() | st.booleans() | st.integers(-2**63, 2**63) | st.floats() | st.text(max_size=10)
json_values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=3)
                           | st.dictionaries(st.text(max_size=8), inner, max_size=3), max_leaves=8)
prompt_spec = st.dictionaries(st.sampled_from(["text", "preset", "weight", "x"]),
                              scalars | st.sampled_from(list(REPORT_STYLES)), max_size=3)
# message-shaped objects: a known type and fields drawn from every message's field names
message_dicts = st.fixed_dictionaries(
    {"type": st.sampled_from(MESSAGE_TYPES)},
    optional={"text": st.text(max_size=30) | st.sampled_from(["cyberpunk", '0: polar, 40: volcano', "[" * 3000]),
              "name": st.sampled_from(list(REPORT_STYLES) + ["nope", ""]) | scalars,
              "transition": st.integers(-5, 20_000) | scalars, "frame": st.integers(-5, 10**9) | scalars,
              "prompts": st.lists(prompt_spec, max_size=9) | scalars, "mode": st.sampled_from(["linear", "slerp", "x"]),
              "schedule": json_values | st.just({"version": 1, "segments": [{"start": 0, "prompt": "polar"}]}),
              "on": scalars, "key": st.sampled_from(KEYS + ("jump",)), "down": scalars,
              "steer": st.floats() | scalars, "throttle": st.floats(), "brake": st.floats(), "reset": scalars,
              "extra": scalars})
messages = (message_dicts.map(json.dumps) | json_values.map(json.dumps) | st.text(max_size=60)
            | st.binary(max_size=60) | st.sampled_from(["[" * 60_000, '{"type": ' * 10_000, "x" * 70_000]))


def test_deeply_nested_messages_are_protocol_errors():
    for text in ("[" * 60_000, '{"type": ' * 6_000):
        with pytest.raises(ProtocolError, match="nested too deeply"):
            parse_client_message(text)


@fuzz_settings(400)
@given(message=messages)
def test_data_channel_parser(message):
    result = outcome(parse_client_message, message)
    assert isinstance(result, (BaseModel, ProtocolError)), result


# ---- a running session takes any message ------------------------------------------------------------------

class RecordingChannel:
    """Stands in for the browser's end of the data channel: keeps what the session sends."""

    readyState = "open"

    def __init__(self) -> None:
        self.sent: list[dict] = []

    def send(self, text: str) -> None:
        self.sent.append(json.loads(text))

    def on(self, event, handler=None):  # the session registers handlers; messages here come from the test
        return handler if handler is not None else (lambda f: f)


@pytest.fixture(scope="module")
def live_session(tmp_path_factory):
    """A real session (recorded sequence, reference renderer, worker thread) on an event loop of its own."""
    folder = tmp_path_factory.mktemp("seq")
    write_npy_windows((synthetic_gbuffer(32, 16, i / 30, i) for i in range(24)), folder)
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    plan = SessionPlan("seq", "reference", 32, 16, 30.0, 0, Schedule.single("cyberpunk"))
    session = LiveSession("fuzz", plan, open_sequence([folder]), ReferenceRenderer("cpu").open_session(32, 16),
                          None, loop=loop)
    channel = RecordingChannel()
    session.attach_channel(channel)
    session.start()
    yield session, channel
    asyncio.run_coroutine_threadsafe(session.close(), loop).result(20)
    loop.call_soon_threadsafe(loop.stop)
    thread.join(5)


def drain_frames(session) -> None:
    """Take what the worker produced so it keeps rendering (the video track's job in a real peer)."""
    session.buffer.clear()


def worker_alive(session) -> bool:
    return any(t.name == f"session-{session.id}" and t.is_alive() for t in threading.enumerate())


@fuzz_settings(150)
@given(message=messages)
def test_a_live_session_survives_any_message(live_session, message):
    session, channel = live_session
    session.control.receive(message)  # on the loop in production; thread-safe by design (commands are queued)
    drain_frames(session)
    assert worker_alive(session), "the session's worker died"


def test_the_session_answered_acks_and_one_line_errors_never_internal_ones(live_session):
    session, channel = live_session
    mark = len(channel.sent)
    for message in [{"type": "preset", "name": "volcano"}, {"type": "seek", "frame": 10**9},
                    {"type": "schedule", "text": "0: polar, 10: volcano"}, {"type": "schedule", "text": "[" * 3000},
                    {"type": "switch", "frame": 5, "prompts": [{"preset": "polar", "weight": 0}]},
                    {"type": "key", "key": "left", "down": True}, {"type": "play"}]:
        session.control.receive(json.dumps(message))
    deadline = time.monotonic() + 20
    while not any(m.get("request") == "play" for m in channel.sent[mark:]) and time.monotonic() < deadline:
        drain_frames(session)
        time.sleep(0.05)
    acks = [m for m in channel.sent[mark:] if m["type"] == "ack"]
    errors = [m for m in channel.sent if m["type"] == "error"]  # the fuzzed messages' errors too
    assert {"preset", "schedule", "play"} <= {a["request"] for a in acks}, acks
    assert any("cannot seek" in e["message"] for e in errors[-10:]) and any("nested" in e["message"] for e in errors)
    assert not [e for e in errors if "internal error" in e["message"]], errors
    assert all("\n" not in e["message"] for e in errors)
    assert worker_alive(session) and session.state == "playing"


# ---- engine feed ------------------------------------------------------------------------------------------

HELLO = Hello("fuzz", 16, 8, 30.0, "zlib")
hello_dicts = st.fixed_dictionaries(
    {"type": st.sampled_from(["hello", "frame"]) | scalars},
    optional={"protocol": st.sampled_from([1, 2]) | scalars, "name": st.sampled_from(["kart", "../x", ""]) | scalars,
              "width": st.integers(-10, 100_000) | scalars, "height": st.integers(-10, 100_000) | scalars,
              "fps": st.floats() | scalars, "compression": st.sampled_from(["none", "zlib", "lzma"]) | scalars})


@fuzz_settings(300)
@given(text=hello_dicts.map(json.dumps) | json_values.map(json.dumps) | st.text(max_size=50) | st.binary(max_size=20)
       | st.sampled_from(["[" * 50_000, '{"type": "hello", "x": ' * 5000]))
def test_feed_hello_parser(text):
    result = outcome(parse_hello, text, FeedLimits())
    assert isinstance(result, (Hello, FeedError)), result
    if isinstance(result, Hello):
        assert 8 <= result.width and 8 <= result.height and result.width * result.height <= FeedLimits().max_pixels


frame_bytes = 5 * 8 * 16 * 3


@fuzz_settings(300)
@given(magic=st.sampled_from([FRAME_MAGIC, b"AGBX"]), version=st.integers(0, 255), compression=st.integers(0, 3),
       width=st.sampled_from([16, 17, 0, 65535]), height=st.sampled_from([8, 9, 0]), index=st.integers(0, 2**32 - 1),
       ts=st.integers(-2**63, 2**63 - 1),
       payload=st.binary(max_size=64) | st.just(bytes(frame_bytes)) | st.just(zlib.compress(bytes(frame_bytes)))
       | st.just(zlib.compress(bytes(100 * frame_bytes))) | st.integers(0, 2 * frame_bytes).map(bytes),
       cut=st.integers(0, 30))
def test_feed_frame_decoder(magic, version, compression, width, height, index, ts, payload, cut):
    message = (FRAME_HEADER.pack(magic, version, compression, width, height, index, ts) + payload)
    message = message[:len(message) - cut]  # truncated, possibly into the header
    result = outcome(decode_frame, message, HELLO)
    assert isinstance(result, FeedError) or result.data.shape == (5, 8, 16, 3)


# ---- WebRTC offers against a running studio ---------------------------------------------------------------

@pytest.fixture(scope="module")
def studio(tmp_path_factory):
    data = tmp_path_factory.mktemp("data")
    write_npy_windows((synthetic_gbuffer(32, 16, i / 30, i) for i in range(8)), data / "tiny")
    with BackgroundServer(Settings(port=0, max_sessions=2, data_dir=data, connect_timeout_s=2)) as server:
        yield server


@pytest.fixture(scope="module")
def real_offer_sdp() -> str:
    return Sdp(asyncio.run(recvonly_offer_sdp(data_channel=True)))


class Sdp(str):
    def __repr__(self) -> str:
        return f"<sdp {len(self)} chars>"


def garbled(sdp: str, data) -> str:
    lines = sdp.splitlines()
    for _ in range(data.draw(st.integers(1, 4))):
        i = data.draw(st.integers(0, len(lines) - 1))
        action = data.draw(st.sampled_from(["drop", "dup", "edit", "swap"]))
        if action == "drop":
            del lines[i]
        elif action == "dup":
            lines.insert(i, lines[i])
        elif action == "swap":
            j = data.draw(st.integers(0, len(lines) - 1))
            lines[i], lines[j] = lines[j], lines[i]
        else:
            cut = data.draw(st.integers(0, len(lines[i])))
            lines[i] = lines[i][:cut] + data.draw(st.text(max_size=12))
        if not lines:
            lines = ["m=video"]
    return "\r\n".join(lines) + "\r\n"


@fuzz_settings(80, deadline_ms=20_000)
@given(data=st.data())
def test_garbage_offers_get_4xx_json(studio, real_offer_sdp, data):
    sdp = data.draw(st.sampled_from(["garbled", "text", "scalar"]))
    body = {"sdp": (garbled(real_offer_sdp, data) if sdp == "garbled" else
                    "m=video " + data.draw(st.text(max_size=80)) if sdp == "text" else data.draw(scalars)),
            "type": data.draw(st.sampled_from(["offer", "answer", 1])),
            "source": data.draw(st.sampled_from(["tiny", "../tiny", "/etc/passwd", "feed:x", "tiny\x00", ""])
                                | scalars)}
    for key in data.draw(st.lists(st.sampled_from(["size", "fps", "bitrate", "seed", "stamp", "schedule", "prompt",
                                                   "renderer", "loop", "bogus"]), max_size=3)):
        body[key] = data.draw(json_values | st.sampled_from(["16x16", "4000x4000", "eight_worlds", "reference"]))
    # json.dumps writes NaN / Infinity, which Python JSON parsers (the server's too) accept
    res = httpx.post(f"{studio.url}/api/webrtc/offer", content=json.dumps(body),
                     headers={"content-type": "application/json"}, timeout=30)
    if res.status_code == 200:  # a garbled-but-valid SDP: a real session that never connects and is dropped
        assert res.json()["session_id"]
        return
    assert res.status_code in (400, 422, 503), (res.status_code, res.text)
    error = res.json()["error"]
    assert error and "\n" not in error, error


@pytest.mark.parametrize("body", ['{"sdp": ' + "[" * 50_000, "[" * 100_000, "\xff\xfe", "null", '"sdp"'])
def test_unparseable_offer_bodies_are_4xx(studio, body):
    res = httpx.post(f"{studio.url}/api/webrtc/offer", content=body.encode("utf-8", "surrogateescape"),
                     headers={"content-type": "application/json"}, timeout=30)
    assert 400 <= res.status_code < 500 and res.json()["error"], res.text


def test_the_studio_is_healthy_after_the_garbage(studio):
    deadline = time.monotonic() + 10
    while studio.sessions and time.monotonic() < deadline:  # sessions from valid-but-garbled SDPs time out
        time.sleep(0.2)
    health = httpx.get(f"{studio.url}/api/health", timeout=60).json()
    assert health["status"] == "ok" and health["sessions"] == 0


def test_a_deeply_nested_feed_hello_closes_the_feed_with_a_reason(studio):
    with connect(f"{studio.ws_url}/api/engine/feed") as ws:
        ws.send("[" * 50_000)
        with pytest.raises(ConnectionClosed) as closed:
            ws.recv(timeout=10)
    assert closed.value.rcvd.code == 4400 and "nested too deeply" in closed.value.rcvd.reason



# ---- WHEP and watchers on a watched session ---------------------------------------------------------------

@pytest.fixture(scope="module")
def watched(tmp_path_factory):
    """A live owner session on its own studio (two watchers at most); yields (studio, session, loop)."""
    data = tmp_path_factory.mktemp("watched")
    write_npy_windows((synthetic_gbuffer(32, 16, i / 30, i) for i in range(24)), data / "tiny")
    loop = LoopThread()
    with BackgroundServer(Settings(port=0, max_sessions=1, max_watchers=2, data_dir=data,
                                   connect_timeout_s=30)) as server:
        owner = loop.run(start_owner(server.url, source="tiny", size="32x16"))
        yield server, server.sessions[owner.session_id], loop
        loop.run(owner.close())
    loop.close()


@fuzz_settings(60, deadline_ms=20_000)
@given(data=st.data())
def test_garbage_whep_offers_get_4xx_json(watched, real_offer_sdp, data):
    studio, session, _ = watched
    body = data.draw(st.sampled_from(["garbled", "text", "binary"]))
    content = (garbled(real_offer_sdp, data).encode() if body == "garbled" else
               data.draw(st.text(max_size=80)).encode("utf-8", "surrogateescape") if body == "text" else
               data.draw(st.binary(max_size=80)))
    key = data.draw(st.sampled_from([session.audience.key, session.audience.key[:-1], "x", "ünï"]))
    headers = {"Authorization": f"Bearer {key}".encode(),
               "Content-Type": data.draw(st.sampled_from(["application/sdp", "application/SDP; charset=utf-8",
                                                          "text/plain", "application/json", ""]))}
    res = httpx.post(f"{studio.url}/whep/{session.id}", content=content, headers=headers, timeout=30)
    if res.status_code == 201:  # a garbled-but-valid SDP: a watcher that would never connect; end it now
        assert res.headers["location"].startswith(f"/whep/{session.id}/")
        bearer = {"Authorization": f"Bearer {session.audience.key}"}
        assert httpx.delete(studio.url + res.headers["location"], headers=bearer).status_code == 200
        return
    assert res.status_code in (400, 401, 415, 503), (res.status_code, res.text)
    error = res.json()["error"]
    assert error and "\n" not in error and session.audience.key not in error, error


@pytest.fixture(scope="module")
def watcher(watched):
    """One watcher with the status channel, for all the fuzzed messages."""
    studio, session, loop = watched
    viewer = loop.run(WhepViewer(studio.url, session.id, session.audience.key, status=True, keep_pixels=False).start())
    yield viewer
    loop.run(viewer.close())


@fuzz_settings(100, deadline_ms=20_000)
@given(message=messages.filter(lambda m: len(m) < 60_000))  # within one SCTP message
def test_a_watcher_is_refused_or_answered_for_any_message(watched, watcher, message):
    loop = watched[2]
    mark = len(watcher.messages)
    loop.run(watcher.send(message))
    reply = loop.run(watcher.wait_until(lambda: [m for m in watcher.messages[mark:] if m["type"] in ("error", "stats")],
                                        20, "an answer"))[0]
    assert reply["type"] == "stats" or ("\n" not in reply["message"] and (
        reply["request"] is None or "watchers cannot control" in reply["message"])), reply


@fuzz_settings(120, deadline_ms=20_000)
@given(data=st.data())
def test_session_routes_refuse_any_credential_but_the_owners(watched, data):
    """Issue 26: every owner route, any key that is not the owner's (near misses, the watch key, garbage), any
    id: refused with one line (401, or 404/405/422 where nothing routes), never let through, never a 5xx."""
    studio, session, _ = watched
    owner = session.owner_key
    key = data.draw(st.sampled_from([session.audience.key, owner[:-1], owner + "x", owner.upper(), owner[1:],
                                     f"Basic {owner}", "", "Bearer", f"Bearer {owner} {owner}"])
                    | st.text(max_size=40).map(lambda t: f"Bearer {t}") | st.text(max_size=40))
    authorization = key if key.startswith(("Basic", "Bearer")) or not key else f"Bearer {key}"
    authorization = "".join(c for c in authorization if c.isprintable()).strip()   # what HTTP can carry
    session_id = data.draw(st.sampled_from([session.id, session.id.upper(), "nope", ".."]) | st.text(
        alphabet=st.characters(min_codepoint=48, max_codepoint=122), min_size=1, max_size=16))
    method, suffix = data.draw(st.sampled_from([("GET", ""), ("GET", "/schedule"), ("POST", "/take"),
                                                ("DELETE", ""), ("PUT", "/take")]))
    body = data.draw(st.sampled_from([{"action": "start"}, {"action": "stop"}, {}, None]))
    res = httpx.request(method, f"{studio.url}/api/sessions/{quote(session_id, safe='')}{suffix}", json=body,
                        headers={"Authorization": authorization.encode("utf-8", "surrogateescape")}, timeout=30)
    assert res.status_code in (401, 404, 405, 422), (method, suffix, authorization, res.status_code, res.text)
    error = res.json()["error"]
    assert error and "\n" not in error and owner not in res.text
    assert session.state == "playing" and session.takes.recorder is None


def test_the_watched_session_is_untouched_after_the_garbage(watched, watcher):
    studio, session, loop = watched
    loop.run(watcher.wait_frames(len(watcher.frames) + 5))
    segments = session.rollout.schedule.to_json()["segments"]
    assert session.state == "playing" and len(segments) == 1 and session.id in studio.sessions
