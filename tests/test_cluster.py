"""Render workers on a real local Ray (issue 13): two CPU workers of one session each, real aiortc viewers.

Placement on the least-loaded worker, 503 when every worker is full, workers in /api/health and /metrics, and a
worker that dies (actor killed, process killed): its viewer gets one error naming the cause, the other streams
on, the pool starts a replacement, and the replacement takes the next session. Ray is shut down at the end."""

from __future__ import annotations

import asyncio
import os
import signal

import httpx
import pytest

from helpers.browser import ADMIN, AS_ADMIN
from helpers.prom import samples
from helpers.sessions import wait_no_sessions
from helpers.waiting import wait_until
from studio.server import Settings
from studio.server.background import BackgroundServer
from webrtc.client import OfferRefused, StudioViewer

ray = pytest.importorskip("ray")

VIEW = {"source": "demo", "size": "64x32", "prompt": "polar", "keep_pixels": False}


def test_workers_that_cannot_start_are_one_line_and_ray_is_left_down(tmp_path):
    """Before the studio's own Ray (module fixture below): a pool whose workers fail at start-up stops asking
    for more after three, says why in one line, and shuts the Ray it started."""
    from cluster.pool import ClusterError, PoolSettings, WorkerPool

    pool = WorkerPool(PoolSettings("local", workers=1, renderer="flash",
                                   renderer_options={"weights": str(tmp_path / "missing")}, local_cpus=1))
    with pytest.raises(ClusterError) as failed:
        pool.start(ready_timeout=120)
    message = str(failed.value)
    assert message.startswith("--cluster: no render worker could start (") and "\n" not in message, message
    assert "missing" in message
    assert not ray.is_initialized()


@pytest.fixture(scope="module")
def studio():
    settings = Settings(port=0, max_sessions=4, cluster="local", workers=2, worker_sessions=1, cluster_cpus=2,
                        warm_text_matching=False, admin_token=ADMIN)
    server = BackgroundServer(settings).start(timeout=180)   # Ray and two workers start with it
    try:
        yield server
    finally:
        server.stop()
    assert not ray.is_initialized(), "the studio did not shut its Ray down"


def pool(studio):
    return studio.app.state.sessions.pool


def ready_workers(studio) -> list[dict]:
    return [w for w in pool(studio).describe() if w["state"] == "ready"]


def worker_of(studio, viewer: StudioViewer) -> dict:
    """The worker hosting this viewer's session."""
    session = studio.sessions[viewer.session_id]
    name = session.rollout.session.worker.name
    return next(w for w in pool(studio).describe() if w["name"] == name)


def test_two_viewers_land_on_different_workers_and_a_third_is_refused(studio):
    wait_until(lambda: len(ready_workers(studio)) == 2, 120, "two ready workers")

    async def scenario():
        async with StudioViewer(studio.url, **VIEW) as a, StudioViewer(studio.url, **VIEW, seed=1) as b:
            await a.wait_frames(5)
            await b.wait_frames(5)
            assert worker_of(studio, a)["name"] != worker_of(studio, b)["name"]
            with pytest.raises(OfferRefused) as refused:          # both workers host their one session
                async with StudioViewer(studio.url, **VIEW):
                    pass
            assert refused.value.status == 503 and "render worker(s)" in refused.value.body["error"]
            async with httpx.AsyncClient(base_url=studio.url, timeout=60) as http:
                health = (await http.get("/api/health", headers=AS_ADMIN)).json()
                stranger = (await http.get("/api/health")).json()
                metrics = samples((await http.get("/metrics", headers=AS_ADMIN)).text)
            # session ids open doors: the workers' are the admin's to see (issue 42)
            assert all("session_ids" not in w for w in stranger["workers"]) and stranger["version"] is None
            assert sorted((w["state"], w["sessions"], w["capacity"]) for w in health["workers"]) == \
                [("ready", 1, 1), ("ready", 1, 1)]
            assert sorted(sid for w in health["workers"] for sid in w["session_ids"]) == \
                sorted([a.session_id, b.session_id])
            assert metrics['alaya_cluster_workers{state="ready"}'] == 2
            assert sum(v for k, v in metrics.items() if k.startswith("alaya_worker_sessions{")) == 2
        assert await wait_no_sessions(studio, 60)
    asyncio.run(scenario())
    assert all(w["sessions"] == 0 for w in ready_workers(studio))     # slots freed when the viewers left


@pytest.mark.parametrize("how", ["actor killed", "process killed"])
def test_a_worker_that_dies_fails_its_viewer_only_and_is_replaced(studio, how):
    wait_until(lambda: len(ready_workers(studio)) == 2, 120, "two ready workers")

    async def scenario():
        async with StudioViewer(studio.url, **VIEW) as victim, StudioViewer(studio.url, **VIEW, seed=1) as other:
            await victim.wait_frames(5)
            await other.wait_frames(5)
            doomed = worker_of(studio, victim)
            handle = next(w for w in pool(studio).workers if w.name == doomed["name"])
            if how == "actor killed":
                ray.kill(handle.actor)
            else:
                os.kill(doomed["pid"], signal.SIGKILL)
            error = await victim.wait_message("error", timeout=60)
            assert error["message"].startswith(f"render worker {doomed['name']} died: "), error
            assert "\n" not in error["message"]
            n = len(other.frames)
            await other.wait_frames(n + 10)                           # the other worker's viewer streams on
            await asyncio.sleep(0)
            assert [m for m in victim.messages if m.get("type") == "error"] == [error]    # told once
            return doomed["name"]
    dead = asyncio.run(scenario())
    assert next(w for w in pool(studio).describe() if w["name"] == dead)["state"] == "dead"
    # the pool asks for a replacement, which takes the next session
    wait_until(lambda: len(ready_workers(studio)) == 2, 120, "a replacement worker")

    async def next_visitor():
        async with StudioViewer(studio.url, **VIEW) as viewer:
            await viewer.wait_frames(3)
        assert await wait_no_sessions(studio, 60)
    asyncio.run(next_visitor())
