"""The engine feed over gRPC against a running studio (`serve --grpc-port`): the token as metadata, reflection,
frames into the same feeds sessions watch, the schedule calls, and bad messages refused in one line while other
streams and sessions go on."""

from __future__ import annotations

import asyncio
import json
import queue
import shutil
import subprocess
import threading
from pathlib import Path

import numpy as np
import pytest
import torch

grpc = pytest.importorskip("grpc", reason="the engines extra")

from grpc_reflection.v1alpha.proto_reflection_descriptor_database import (  # noqa: E402
    ProtoReflectionDescriptorDatabase)

from gbuffer.feed.grpc import engine_feed_pb2 as pb  # noqa: E402
from gbuffer.feed.grpc import engine_feed_pb2_grpc as rpc  # noqa: E402
from gbuffer.feed.grpc.messages import frame_message, open_message  # noqa: E402
from gbuffer.feed.protocol import Hello  # noqa: E402
from gbuffer.formats import write_npy_windows  # noqa: E402
from gbuffer.frame import GBufferFrame  # noqa: E402
from helpers.waiting import wait_until  # noqa: E402
from renderer.reference.synthetic import synthetic_gbuffer  # noqa: E402
from studio.server import Settings  # noqa: E402
from studio.server.background import BackgroundServer, free_port  # noqa: E402
from studio.server.grpc_service import serve_grpc  # noqa: E402
from webrtc.client import StudioViewer  # noqa: E402

TOKEN = "s3cret-token"
ADMIN = "admin-token-0123456789"
AUTH = (("authorization", f"Bearer {TOKEN}"),)


@pytest.fixture(scope="module")
def studio(tmp_path_factory):
    torch.set_num_threads(1)
    data = tmp_path_factory.mktemp("data")
    write_npy_windows((synthetic_gbuffer(160, 96, i / 30, i) for i in range(32)), data / "drive")
    settings = Settings(port=0, max_sessions=3, data_dir=data, token=TOKEN, admin_token=ADMIN,
                        grpc_port=free_port())
    server = BackgroundServer(settings)
    serve_grpc(server.app)
    with server:
        yield server


@pytest.fixture
def stub(studio):
    with grpc.insecure_channel(f"127.0.0.1:{studio.settings.grpc_port}") as channel:
        yield rpc.EngineFeedStub(channel)


class Engine:
    """A raw stream: messages go out as they are queued, what comes back is read by the caller."""

    def __init__(self, stub, metadata=AUTH):
        self._out: queue.Queue = queue.Queue()
        self.call = stub.Stream(iter(self._out.get, None), metadata=metadata)

    def send(self, message: pb.EngineMessage) -> "Engine":
        self._out.put(message)
        return self

    def next(self) -> pb.StudioMessage:
        return next(self.call)

    def refusal(self) -> tuple[grpc.StatusCode, str]:
        """How the studio ended the stream (reading past whatever it sent first)."""
        with pytest.raises(grpc.RpcError) as ended:
            for _ in range(1000):
                self.next()
        return ended.value.code(), ended.value.details()

    def close(self) -> None:
        self._out.put(None)


def _frame(index=0, w=32, h=16) -> pb.EngineMessage:
    return frame_message(GBufferFrame(index, index / 30, np.full((5, h, w, 3), index % 256, np.uint8)))


def _open(feed, w=32, h=16, fps=30.0, **fields) -> pb.EngineMessage:
    message = open_message(Hello(feed, w, h, fps))
    for field, value in fields.items():
        if field == "output":
            message.open.output.CopyFrom(value)
        else:
            setattr(message.open, field, value)
    return message


def test_the_stream_needs_the_feed_token_as_metadata(stub):
    for metadata in (None, (("authorization", "Bearer wrong"),)):
        code, line = Engine(stub, metadata).send(_open("intruder")).refusal()
        assert code == grpc.StatusCode.UNAUTHENTICATED
        assert line == "a valid token is required (metadata authorization: Bearer TOKEN)"
    engine = Engine(stub).send(_open("friend"))
    welcome = engine.next().welcome
    assert welcome.source == "feed:friend" and welcome.limits.max_pixels == 1920 * 1080
    engine.close()                    # a half-close ends the feed, and the stream with OK
    assert list(engine.call) == [] and engine.call.code() == grpc.StatusCode.OK


def test_the_service_is_discoverable_by_reflection(studio):
    with grpc.insecure_channel(f"127.0.0.1:{studio.settings.grpc_port}") as channel:
        database = ProtoReflectionDescriptorDatabase(channel)
        assert "alaya.engine.v1.EngineFeed" in set(database.get_services())
        service = database.FindFileContainingSymbol("alaya.engine.v1.EngineFeed")
        assert {m.name for m in service.service[0].method} == {"Stream", "GetSchedule", "SetSchedule"}
        assert "Frame" in {m.name for m in service.message_type}


def test_a_session_watches_a_grpc_feed_and_drives_it(studio, stub):
    engine = Engine(stub).send(_open("grpc-kart", 160, 96))
    assert engine.next().welcome.source == "feed:grpc-kart"
    stop = threading.Event()
    received: list[pb.StudioMessage] = []

    def stream_frames():              # 30 fps until the test is done, reading what comes back meanwhile
        reader = threading.Thread(target=lambda: received.extend(engine.call), daemon=True)
        reader.start()
        index = 0
        while not stop.wait(1 / 30):
            engine.send(_frame(index, 160, 96))
            index += 1
        engine.close()
        reader.join(10)

    streamer = threading.Thread(target=stream_frames, daemon=True)
    streamer.start()
    try:
        async def scenario():
            async with StudioViewer(studio.url, source="feed:grpc-kart", size="160x96", keep_pixels=True) as viewer:
                hello = await viewer.wait_message("hello")
                assert hello["live"] and hello["source"] == "feed:grpc-kart"
                await viewer.wait_frames(10)
                await viewer.send({"type": "input", "steer": 0.5, "throttle": 1.0, "brake": 0.0, "reset": False})
                await viewer.wait_until(lambda: any(m.WhichOneof("kind") == "input" for m in received), 30,
                                        "the page's input at the engine")
        asyncio.run(scenario())
    finally:
        stop.set()
        streamer.join(15)
    kinds = [m.WhichOneof("kind") for m in received]
    assert "event" in kinds and "input" in kinds
    steer = next(m.input for m in received if m.WhichOneof("kind") == "input")
    assert (steer.steer, steer.throttle) == (0.5, 1.0)
    wait_until(lambda: "grpc-kart" not in studio.app.state.feeds.names(), 20, "the feed to go")


BAD_STREAMS = [
    ("frame before open", [_frame()], grpc.StatusCode.INVALID_ARGUMENT,
     "open: the first message must be open, got frame"),
    ("empty message", [pb.EngineMessage()], grpc.StatusCode.INVALID_ARGUMENT,
     "open: the first message must be open, got an empty message"),
    ("bad name", [_open("ok", name="../x")], grpc.StatusCode.INVALID_ARGUMENT,
     "open.name: String should match pattern"),
    ("bad enum", [_open("enum", compression=5)], grpc.StatusCode.INVALID_ARGUMENT,
     "open.compression: 5 is not one of 0 (none), 1 (zlib)"),
    ("missing size", [_open("nosize", width=0)], grpc.StatusCode.INVALID_ARGUMENT, "open.width: Input should be"),
    ("wrong plane size", [_open("small"), _frame(3, 16, 16)], grpc.StatusCode.INVALID_ARGUMENT,
     "frame 3: frame.gbuffer.albedo: 768 bytes; a 32x16 plane (H, W, 3) has 1536"),
    ("missing G-buffer", [_open("nogb"), pb.EngineMessage(frame=pb.Frame(index=4))], grpc.StatusCode.INVALID_ARGUMENT,
     "frame 4: frame.gbuffer: missing"),
    ("open twice", [_open("twice"), _open("twice")], grpc.StatusCode.INVALID_ARGUMENT,
     "open: sent twice: open comes once, first"),
    ("control without a session", [_open("ctl"), pb.EngineMessage(control=pb.Control(json="{}"))],
     grpc.StatusCode.INVALID_ARGUMENT, "control: needs open.output"),
    ("flood", [_open("flood", fps=5.0)] + [_frame(i) for i in range(40)], grpc.StatusCode.RESOURCE_EXHAUSTED,
     "engine feed: more than 8 frames a second beyond a burst of 17"),
]


def test_bad_messages_end_their_stream_in_one_line_while_another_session_streams_on(studio, stub):
    async def scenario():
        async with StudioViewer(studio.url, source="drive", size="160x96", keep_pixels=False) as viewer:
            await viewer.wait_frames(5)
            good = Engine(stub).send(_open("steady"))
            assert good.next().welcome.source == "feed:steady"

            def attack() -> list[tuple[grpc.StatusCode, str]]:
                outcomes = []
                for index, (_, messages, _, _) in enumerate(BAD_STREAMS):
                    engine = Engine(stub)
                    for message in messages:
                        engine.send(message)
                    good.send(_frame(index))
                    outcomes.append(engine.refusal())
                    engine.close()
                return outcomes

            n = len(viewer.frames)
            outcomes = await asyncio.to_thread(attack)
            for (what, _, code, line), (got_code, got_line) in zip(BAD_STREAMS, outcomes):
                assert got_code == code, f"{what}: {got_code} {got_line}"
                assert got_line.startswith(line) and "\n" not in got_line, f"{what}: {got_line}"
            await viewer.wait_frames(n + 15)          # the session streamed on
            feed = studio.app.state.feeds.get("steady")
            assert feed.frames == len(BAD_STREAMS)      # and so did the good stream, every frame taken
            good.close()
    asyncio.run(scenario())
    wait_until(lambda: not studio.app.state.feeds.names(), 20, "every feed to go")


def test_a_name_already_streaming_is_refused(stub):
    first = Engine(stub).send(_open("twin"))
    assert first.next().welcome.source == "feed:twin"
    code, line = Engine(stub).send(_open("twin")).refusal()
    assert code == grpc.StatusCode.ALREADY_EXISTS and line == "hello.name: a feed named 'twin' is already connected"
    first.close()


def test_a_message_beyond_one_frame_at_the_cap_is_refused_by_the_transport(studio, stub):
    limits = studio.app.state.feeds.limits
    huge = pb.EngineMessage(frame=pb.Frame(gbuffer=pb.GBuffer(albedo=bytes(7 * limits.max_pixels * 3))))
    code, line = Engine(stub).send(_open("huge")).send(huge).refusal()
    assert code == grpc.StatusCode.RESOURCE_EXHAUSTED and "larger than max" in line
    engine = Engine(stub).send(_open("after-huge"))
    assert engine.next().welcome.source == "feed:after-huge"        # the server goes on
    engine.close()


def test_the_schedule_calls_take_the_owner_key_or_the_admin_token(studio, stub):
    async def scenario():
        async with StudioViewer(studio.url, source="drive", size="160x96", keep_pixels=False) as viewer:
            await viewer.wait_frames(2)
            session_id = viewer.session_id
            owner = (("authorization", f"Bearer {viewer.owner_key}"),)

            def calls():
                request = pb.ScheduleRequest(session_id=session_id)
                for metadata in (None, (("authorization", "Bearer nope"),), AUTH):
                    with pytest.raises(grpc.RpcError) as refused:
                        stub.GetSchedule(request, metadata=metadata)
                    assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED
                before = json.loads(stub.GetSchedule(request, metadata=owner).json)
                with pytest.raises(grpc.RpcError) as bad:
                    stub.SetSchedule(pb.SetScheduleRequest(session_id=session_id, schedule='{"0": '),
                                     metadata=owner)
                assert bad.value.code() == grpc.StatusCode.INVALID_ARGUMENT
                assert bad.value.details().startswith("schedule")
                reply = stub.SetSchedule(pb.SetScheduleRequest(session_id=session_id,
                                                               schedule='{"0": "volcano", "60": "polar"}'),
                                         metadata=(("authorization", f"Bearer {ADMIN}"),))
                after = json.loads(stub.GetSchedule(request, metadata=owner).json)
                return before, json.loads(reply.json), after

            before, replied, after = await asyncio.to_thread(calls)
            assert replied == after and after != before
            assert [s["prompts"][0]["preset"] for s in after["segments"]] == ["volcano", "polar"]
        with pytest.raises(grpc.RpcError) as gone:
            await asyncio.to_thread(stub.GetSchedule, pb.ScheduleRequest(session_id=session_id),
                                    metadata=(("authorization", f"Bearer {ADMIN}"),))
        assert gone.value.code() == grpc.StatusCode.NOT_FOUND
    asyncio.run(scenario())


# ---- the return path -------------------------------------------------------------------------------------

def _client(studio, name, **output):
    from gbuffer.feed.grpc.client import GrpcFeedClient

    return GrpcFeedClient(f"127.0.0.1:{studio.settings.grpc_port}", name=name, width=64, height=32, fps=30,
                          token=TOKEN, output=output)


def lockstep(client, indices) -> list:
    """Send each frame once the previous one has come back styled: an engine loop with one frame in flight."""
    back = []
    for i in indices:
        client.send_frame(synthetic_gbuffer(64, 32, i / 30, i))
        back.append(next(s for s in client.frames(timeout=60) if s.index == i))
    return back


def test_a_grpc_engine_gets_its_styled_frames_back_and_steers_its_own_session(studio, stub):
    with _client(studio, "looped", prompt="volcano") as client:
        welcome = client.welcome
        assert (welcome.source, welcome.renderer, welcome.width, welcome.height) == ("feed:looped", "reference", 64, 32)
        assert welcome.session_id in studio.sessions and welcome.watch_key in welcome.watch_path
        back = lockstep(client, range(8))
        assert [s.index for s in back] == list(range(8))
        assert all(s.format == "rgb24" and s.rgb().shape == (32, 64, 3) and s.studio_ms > s.render_ms > 0
                   for s in back)
        assert len({s.rgb().tobytes() for s in back}) > 1          # a moving scene, rendered frame by frame
        trips = client.roundtrips.summary()
        assert trips["frames_received"] == 8 and trips["roundtrip_p95_ms"] >= trips["roundtrip_p50_ms"] > 0

        ack = client.control({"type": "prompt", "text": "polar"})
        assert (ack["type"], ack["request"], ack["label"]) == ("ack", "prompt", "polar")
        refused = client.control({"type": "preset", "name": "no-such-style"})
        assert refused["type"] == "error" and "no-such-style" in refused["message"]
        schedule = json.loads(stub.GetSchedule(pb.ScheduleRequest(session_id=welcome.session_id),
                                               metadata=(("authorization", f"Bearer {welcome.owner_key}"),)).json)
        assert [s["prompts"][0]["preset"] for s in schedule["segments"]][-1] == "polar"
        lockstep(client, range(8, 10))                              # frames go on after both
    wait_until(lambda: welcome.session_id not in studio.sessions, 20, "the engine's session to end with its stream")


def test_styled_frames_come_back_as_jpeg_when_asked(studio):
    with _client(studio, "jpeg", prompt="cyberpunk", format="jpeg", quality=60) as client:
        assert client.welcome.format == pb.FORMAT_JPEG
        styled = lockstep(client, [0])[0]
        assert styled.format == "jpeg" and styled.data[:2] == b"\xff\xd8" and styled.rgb().shape == (32, 64, 3)


@pytest.mark.parametrize("output, code, line", [
    ({"size": "3x3"}, grpc.StatusCode.INVALID_ARGUMENT, "open.output: size: 3x3 must be between"),
    ({"renderer": "nope"}, grpc.StatusCode.INVALID_ARGUMENT, "open.output"),
    ({"quality": 101}, grpc.StatusCode.INVALID_ARGUMENT, "open.output.quality"),
])
def test_a_bad_output_request_is_refused_in_one_line(studio, output, code, line):
    from gbuffer.feed.protocol import FeedError

    client = _client(studio, "badout", **output)
    with pytest.raises(FeedError) as refused:
        client.connect()
    assert client.status == code
    assert refused.value.detail.startswith(f"the studio refused the feed: {line}")
    assert "\n" not in str(refused.value)
    wait_until(lambda: "badout" not in studio.app.state.feeds.names(), 20, "the refused feed to go")


def test_an_engine_that_stops_reading_stalls_nothing_and_then_hears_what_it_missed(studio, stub):
    FRAMES = 40
    engine = Engine(stub).send(_open("stalled", 416, 224, output=pb.OutputRequest(prompt="sandstorm")))
    session_id = engine.next().welcome.session_id
    session = studio.sessions[session_id]

    async def scenario():
        async with StudioViewer(studio.url, source="drive", size="160x96", keep_pixels=False) as viewer:
            await viewer.wait_frames(3)
            n = len(viewer.frames)

            def stream_without_reading():         # 11 MB of styled frames back: past the transport's buffers
                for i in range(FRAMES):
                    engine.send(frame_message(synthetic_gbuffer(416, 224, i / 30, i)))
                    wait_until(lambda i=i: session.rollout.frame_index > i, 30, f"frame {i} rendered")

            await asyncio.to_thread(stream_without_reading)     # the renderer kept pace with the engine
            await viewer.wait_frames(n + 10)                    # and the other session streamed on
    asyncio.run(scenario())
    styled = []
    while not styled or styled[-1].index != FRAMES - 1:
        message = engine.next()
        if message.WhichOneof("kind") == "styled":
            styled.append(message.styled)
    assert len(styled) < FRAMES and sum(s.missed for s in styled) == FRAMES - len(styled)
    engine.close()
    wait_until(lambda: session_id not in studio.sessions, 20, "the engine's session to end")


@pytest.mark.slow
@pytest.mark.skipif(not (shutil.which("protoc") and shutil.which("grpc_cpp_plugin") and shutil.which("pkg-config")),
                    reason="a C++ gRPC toolchain (apt: protobuf-compiler-grpc libgrpc++-dev)")
def test_a_cpp_client_generated_from_the_proto_streams_and_gets_its_frames_back(studio, tmp_path):
    """The C++ (Unreal) route of docs/engines.md, for real: protoc with grpc_cpp_plugin, g++, and a run."""
    root = Path(__file__).resolve().parents[1]
    subprocess.run(["protoc", f"-I{root}", f"--cpp_out={tmp_path}", f"--grpc_out={tmp_path}",
                    f"--plugin=protoc-gen-grpc={shutil.which('grpc_cpp_plugin')}",
                    str(root / "gbuffer/feed/grpc/engine_feed.proto")], check=True)
    flags = subprocess.run(["pkg-config", "--cflags", "--libs", "grpc++", "protobuf"], capture_output=True,
                           text=True, check=True).stdout.split()
    generated = sorted(str(p) for p in (tmp_path / "gbuffer/feed/grpc").glob("*.cc"))
    subprocess.run(["g++", "-std=c++17", "-O1", f"-I{tmp_path}", str(root / "tests/helpers/engine_feed_client.cc"),
                    *generated, *flags, "-o", str(tmp_path / "client")], check=True, timeout=600)
    run = subprocess.run([str(tmp_path / "client"), f"127.0.0.1:{studio.settings.grpc_port}", TOKEN],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr + run.stdout
    assert "welcome session=" in run.stdout and "sent 10 received 10 status 0" in run.stdout
    refused = subprocess.run([str(tmp_path / "client"), f"127.0.0.1:{studio.settings.grpc_port}", "wrong"],
                             capture_output=True, text=True, timeout=60)
    assert refused.returncode == 1 and "no welcome" in refused.stderr


def test_engine_sessions_count_against_the_studios_session_limit(studio):
    """Three slots (the fixture's max_sessions): three engines get sessions, a fourth hears UNAVAILABLE."""
    from gbuffer.feed.protocol import FeedError

    stop = threading.Event()
    clients = [_client(studio, f"slot{i}", prompt="polar") for i in range(studio.settings.max_sessions)]

    def keep_alive(client):           # a session's source ends when its feed goes quiet: keep each one fed
        index = 0
        while not stop.wait(0.1) and client.connected:
            client.send_frame(synthetic_gbuffer(64, 32, index / 30, index))
            index += 1

    threads = []
    try:
        for client in clients:
            client.connect()
            threads.append(threading.Thread(target=keep_alive, args=(client,), daemon=True))
            threads[-1].start()
        late = _client(studio, "late", prompt="polar")
        with pytest.raises(FeedError) as refused:
            late.connect()
        assert late.status == grpc.StatusCode.UNAVAILABLE
        assert refused.value.detail.startswith("the studio refused the feed: studio full")
        assert all(c.connected for c in clients)
    finally:
        stop.set()
        for thread in threads:
            thread.join(10)
        for client in clients:
            client.close()
    wait_until(lambda: not studio.sessions, 20, "the engines' sessions to end")


def test_an_engine_gone_quiet_is_ended_after_the_idle_timeout_and_so_is_its_session(studio, stub):
    engine = Engine(stub).send(_open("quiet", output=pb.OutputRequest(prompt="polar")))
    session_id = engine.next().welcome.session_id
    engine.send(_frame(0))
    code, line = engine.refusal()     # nothing more is sent, and the stream is kept open
    assert (code, line) == (grpc.StatusCode.DEADLINE_EXCEEDED, "no message within the idle timeout (10 s)")
    wait_until(lambda: session_id not in studio.sessions, 20, "the quiet engine's session to end")
    engine.close()


def test_no_studio_at_the_address_is_one_line():
    from gbuffer.feed.grpc.client import GrpcFeedClient
    from gbuffer.feed.protocol import FeedError

    client = GrpcFeedClient(f"127.0.0.1:{free_port()}", name="lost", width=32, height=16, fps=30)
    with pytest.raises(FeedError) as refused:
        client.connect()
    assert str(refused.value).startswith("--connect: cannot connect to 127.0.0.1:") and "\n" not in str(refused.value)
