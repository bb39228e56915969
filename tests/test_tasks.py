"""Every task the server starts is held by its owner and finished when the owner closes: sessions closed
mid-offer and mid-stream leave no pending task on the server's loop and no asyncio warning."""

from __future__ import annotations

import asyncio
import gc
import logging
import warnings

import httpx
import pytest
import torch
from aiortc import RTCPeerConnection, RTCSessionDescription

from helpers.sessions import wait_no_sessions
from helpers.waiting import wait_until
from studio.server import Settings
from studio.server.background import BackgroundServer
from webrtc.client import StudioViewer

OPTIONS = {"size": "64x32", "source": "demo"}


@pytest.fixture
def studio():
    torch.set_num_threads(1)
    with BackgroundServer(Settings(port=0, max_sessions=2, connect_timeout_s=2)) as server:
        yield server


def loop_tasks(studio) -> set[asyncio.Task]:
    async def snapshot():
        return {t for t in asyncio.all_tasks() if t is not asyncio.current_task()}
    return asyncio.run_coroutine_threadsafe(snapshot(), studio.app.state.loop).result(10)


def names(tasks: set[asyncio.Task]) -> list[str]:
    return sorted(f"{t.get_name()}: {t.get_coro()!r}" for t in tasks)


def watchers_of(studio, session_id: str) -> list[asyncio.Task]:
    """Pending tasks still working for this session: coroutines of the server whose frame holds the session."""
    def about(task: asyncio.Task) -> bool:
        frame = getattr(task.get_coro(), "cr_frame", None)
        session = frame.f_locals.get("session") if frame is not None else None
        return getattr(session, "id", None) == session_id
    return [t for t in loop_tasks(studio) if about(t)]


async def offer_without_connecting(studio) -> tuple[str, dict]:
    """An offer whose peer goes away right after the answer: the session exists but never connects;
    → (its id, the owner's headers)."""
    pc = RTCPeerConnection()
    pc.addTransceiver("video", direction="recvonly")
    pc.createDataChannel("control")
    await pc.setLocalDescription(await pc.createOffer())
    async with httpx.AsyncClient(base_url=studio.url, timeout=30) as http:
        answer = (await http.post("/api/webrtc/offer", json={"sdp": pc.localDescription.sdp, **OPTIONS})).json()
    await pc.setRemoteDescription(RTCSessionDescription(answer["sdp"], "answer"))
    await pc.close()
    return answer["session_id"], {"Authorization": f"Bearer {answer['owner_key']}"}


def test_sessions_closed_mid_offer_and_mid_stream_leave_no_task_and_no_warning(studio, caplog):
    baseline = loop_tasks(studio)

    async def scenario():
        # mid-stream: the viewer goes away, and a session is ended over the API
        async with StudioViewer(studio.url, **OPTIONS, keep_pixels=False) as viewer:
            await viewer.wait_frames(4)
        async with StudioViewer(studio.url, **OPTIONS, keep_pixels=False) as viewer:
            await viewer.wait_frames(4)
            async with httpx.AsyncClient(base_url=studio.url, timeout=60) as http:
                assert (await http.delete(f"/api/sessions/{viewer.session_id}", headers=viewer.auth)).status_code == 204
            # ending a session finishes its watchdog too, before the answer (not a second later, on its own)
            assert watchers_of(studio, viewer.session_id) == []
        assert await wait_no_sessions(studio, 20)
        # mid-offer: answered but never connected (ended by the connect timeout), and ended over the API
        await offer_without_connecting(studio)
        session_id, owner = await offer_without_connecting(studio)
        async with httpx.AsyncClient(base_url=studio.url, timeout=60) as http:
            assert (await http.delete(f"/api/sessions/{session_id}", headers=owner)).status_code == 204
        assert watchers_of(studio, session_id) == []
        assert await wait_no_sessions(studio, 20)

    with warnings.catch_warnings(record=True) as caught, caplog.at_level(logging.WARNING, logger="asyncio"):
        warnings.simplefilter("always")
        asyncio.run(scenario())
        # the HTTP requests' own tasks finish just after their responses
        wait_until(lambda: loop_tasks(studio) <= baseline, 10,
                   "the server's loop to hold only its own tasks")
        assert len(studio.app.state.sessions.tasks) == 0
        gc.collect()   # a task collected while pending would log "Task was destroyed but it is pending!"
    assert names(loop_tasks(studio) - baseline) == []
    asyncio_warnings = [r.getMessage() for r in caplog.records if r.name == "asyncio"]
    assert asyncio_warnings == []
    unawaited = [str(w.message) for w in caught if "never awaited" in str(w.message) or
                 "Task" in str(w.message)]
    assert unawaited == []
