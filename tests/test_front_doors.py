"""One way in to a live session (issue 43): each front door (the owner's data channel, the REST routes, gRPC, OSC
and an engine's link) hands its command to the same `SessionControl.submit`, and a second visitor at that door
reaches nothing of the first visitor's session. Only the session's worker writes its timeline: a write from any
other thread fails, and the session goes on."""

from __future__ import annotations

import asyncio
import threading

import httpx
import pytest
import torch

grpc = pytest.importorskip("grpc", reason="the engines extra")

from pythonosc.udp_client import SimpleUDPClient  # noqa: E402

from gbuffer.feed.grpc import engine_feed_pb2 as pb  # noqa: E402
from gbuffer.feed.grpc import engine_feed_pb2_grpc as rpc  # noqa: E402
from helpers.browser import ADMIN, AS_ADMIN  # noqa: E402
from helpers.sessions import wait_no_sessions  # noqa: E402
from prompt_presets import Conditioning, resolve_prompt  # noqa: E402
from studio.server import Settings  # noqa: E402
from studio.server.background import BackgroundServer, free_port  # noqa: E402
from studio.server.control import SessionControl  # noqa: E402
from studio.server.engine_link import EngineLink, OutputRequest  # noqa: E402
from studio.server.grpc_service import serve_grpc  # noqa: E402
from test_engine_link import connect_feed, owner, push  # noqa: E402
from test_engine_link import studio as engine_studio  # noqa: E402
from test_osc import free_udp_port  # noqa: E402
from timeline.schedule.live import CrossThreadWrite  # noqa: E402
from webrtc.client import StudioViewer  # noqa: E402

VIEW = {"size": "64x32", "source": "demo", "keep_pixels": False}


@pytest.fixture(scope="module")
def studio(tmp_path_factory):
    torch.set_num_threads(1)
    settings = Settings(port=0, max_sessions=3, admin_token=ADMIN, grpc_port=free_port(), osc_port=free_udp_port(),
                        takes_dir=tmp_path_factory.mktemp("takes"), warm_text_matching=False)
    server = BackgroundServer(settings)
    serve_grpc(server.app)
    with server:
        yield server


@pytest.fixture
def submitted(monkeypatch):
    """(the control, the message type) of every command any front door submits."""
    seen: list[tuple[SessionControl, str]] = []
    submit = SessionControl.submit

    def spy(self, msg, reply=None):
        seen.append((self, msg.type))
        return submit(self, msg, reply)
    monkeypatch.setattr(SessionControl, "submit", spy)
    return seen


def bearer(key: str) -> dict:
    return {"authorization": f"Bearer {key}"}


def test_every_front_door_runs_the_same_command_and_a_second_visitor_reaches_nothing(studio, submitted):
    osc = SimpleUDPClient("127.0.0.1", studio.settings.osc_port)

    async def scenario():
        async with StudioViewer(studio.url, **VIEW) as first, StudioViewer(studio.url, **VIEW) as second:
            await first.wait_frames(2)
            await second.wait_frames(2)
            control = studio.sessions[first.session_id].control
            others = studio.sessions[second.session_id].control

            def on_first() -> list[str]:
                return [kind for c, kind in submitted if c is control]

            # the data channel: a visitor's channel reaches its own session only
            mark = len(second.messages)
            await second.send({"type": "preset", "name": "polar"})
            await second.wait_message("ack", after=mark, request="preset")
            assert on_first() == [] and (others, "preset") in submitted
            mark = len(first.messages)
            await first.send({"type": "preset", "name": "volcano"})
            await first.wait_message("ack", after=mark, request="preset")
            assert on_first() == ["preset"]

            async with httpx.AsyncClient(base_url=studio.url, timeout=30) as http:
                # REST: the take route, for the owner; 401 for the second visitor, before anything is submitted
                take = f"/api/sessions/{first.session_id}/take"
                assert (await http.post(take, json={"action": "start"}, headers=second.auth)).status_code == 401
                assert on_first() == ["preset"]
                mark = len(first.messages)
                started = await http.post(take, json={"action": "start"}, headers=first.auth)
                assert started.status_code == 200 and started.json()["recording"] is True
                await first.wait_message("ack", after=mark, request="take")      # the page hears it too
                assert (await http.post(take, json={"action": "stop"}, headers=first.auth)).status_code == 200
                assert on_first() == ["preset", "take", "take"]

                # gRPC: the owner's key sets the schedule; the second visitor's key is refused
                def set_schedule(key: str):
                    with grpc.insecure_channel(f"127.0.0.1:{studio.settings.grpc_port}") as channel:
                        request = pb.SetScheduleRequest(session_id=first.session_id, schedule="0: polar")
                        return rpc.EngineFeedStub(channel).SetSchedule(request, metadata=tuple(bearer(key).items()))
                with pytest.raises(grpc.RpcError) as refused:
                    await asyncio.to_thread(set_schedule, second.owner_key)
                assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED
                assert on_first() == ["preset", "take", "take"]
                await asyncio.to_thread(set_schedule, first.owner_key)
                assert on_first()[-1] == "schedule"

                # OSC steers the session the admin names, and a visitor cannot name one
                body = {"session_id": first.session_id}
                assert (await http.put("/api/osc", json=body, headers=second.auth)).status_code == 401
                assert (await http.put("/api/osc", json=body, headers=AS_ADMIN)).status_code == 200
                mark = len(first.messages)
                osc.send_message("/alaya/preset", "infrared")
                await first.wait_message("ack", after=mark, request="preset")
                assert on_first() == ["preset", "take", "take", "schedule", "preset"]
                assert (await http.put("/api/osc", json={"session_id": None}, headers=AS_ADMIN)).status_code == 200
            assert [kind for c, kind in submitted if c is others] == ["preset"]
        assert await wait_no_sessions(studio)

    asyncio.run(scenario())


def test_an_engines_link_runs_the_same_command_and_reaches_its_own_session_only(submitted):
    async def scenario():
        async with engine_studio(max_sessions=2) as manager:
            feeds = [connect_feed(manager, name) for name in ("one", "two")]
            links = [await EngineLink.open(manager, feed, OutputRequest(prompt="volcano"), owner(manager))
                     for feed in feeds]
            try:
                for i, feed in enumerate(feeds):
                    push(feed, i)
                ack = await links[0].control({"type": "preset", "name": "polar"})
                assert ack["type"] == "ack" and ack["request"] == "preset"
                assert submitted == [(links[0].session.control, "preset")]
                refused = await links[1].control({"type": "seek", "frame": 3})   # a live feed cannot seek
                assert refused["type"] == "error" and refused["request"] == "seek"
                assert submitted[1] == (links[1].session.control, "seek")
            finally:
                for link in links:
                    await link.close()

    asyncio.run(scenario())


def test_only_the_sessions_worker_writes_its_timeline(studio):
    """A write from any thread but the worker's (here the test's) fails at once, and the session goes on."""
    async def scenario():
        async with StudioViewer(studio.url, **VIEW) as viewer:
            await viewer.wait_frames(2)
            timeline = studio.sessions[viewer.session_id].control.parts.timeline
            before = timeline.schedule
            with pytest.raises(CrossThreadWrite, match="not from its session's worker"):
                timeline.switch(0, Conditioning((resolve_prompt("polar"),)), 0)
            with pytest.raises(CrossThreadWrite):
                timeline.source_loop = 3
            assert timeline.schedule is before and threading.current_thread().name != f"session-{viewer.session_id}"
            n = len(viewer.frames)
            mark = len(viewer.messages)
            await viewer.send({"type": "preset", "name": "polar"})     # the worker's own write still lands
            await viewer.wait_message("ack", after=mark, request="preset")
            await viewer.wait_frames(n + 5)
            assert timeline.schedule is not before
        assert await wait_no_sessions(studio)

    asyncio.run(scenario())
