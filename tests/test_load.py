"""Load: offers beyond the session limit are refused cleanly (HTTP 503, nothing half-built), and many
connect/disconnect cycles of real aiortc viewers leave no sessions, threads, session objects or memory behind."""

from __future__ import annotations

import asyncio
import gc
import threading
import time
import weakref

import httpx
import pytest
import torch

from gbuffer.formats import write_npy_windows
from helpers.parseq import parseq_export, parseq_prompt
from helpers.prom import AS_SCRAPER, SCRAPER, samples
from helpers.sessions import wait_no_sessions
from renderer.reference.synthetic import synthetic_gbuffer
from studio.server import Settings
from studio.server.background import BackgroundServer
from webrtc.client import OfferRefused, StudioViewer

TINY = {"size": "32x16", "source": "tiny", "keep_pixels": False}
LIMIT = 3


@pytest.fixture(scope="module")
def studio(tmp_path_factory):
    torch.set_num_threads(1)
    data = tmp_path_factory.mktemp("data")
    write_npy_windows((synthetic_gbuffer(32, 16, i / 30, i) for i in range(16)), data / "tiny")
    with BackgroundServer(Settings(port=0, max_sessions=LIMIT, data_dir=data, connect_timeout_s=5,
                                            metrics_token=SCRAPER)) as server:
        yield server


def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096


def test_offers_beyond_the_limit_are_refused_cleanly(studio):
    async def scenario():
        refused_before = studio.app.state.sessions.sessions_refused
        viewers = [StudioViewer(studio.url, **TINY) for _ in range(2 * LIMIT)]
        results = await asyncio.gather(*(v.start() for v in viewers), return_exceptions=True)
        try:
            admitted = [r for r in results if isinstance(r, StudioViewer)]
            refusals = [r for r in results if isinstance(r, OfferRefused)]
            assert len(admitted) == LIMIT and len(refusals) == LIMIT, results
            assert all(r.status == 503 and "studio full" in r.body["error"] for r in refusals)
            assert len(studio.sessions) == LIMIT
            for v in admitted:
                await v.wait_frames(3)  # admitted sessions are whole, not starved by the refused ones
            async with httpx.AsyncClient(base_url=studio.url, timeout=60) as http:
                res = await http.post("/api/webrtc/offer", json={"sdp": "m=video", "size": "32x16"})
                assert res.status_code == 503 and res.headers["retry-after"] == "10"
                metrics = (await http.get("/metrics", headers=AS_SCRAPER)).text
            assert samples(metrics)["alaya_sessions_refused_total"] == refused_before + LIMIT + 1
        finally:
            await asyncio.gather(*(v.close() for v in viewers))
        assert await wait_no_sessions(studio)
    asyncio.run(scenario())


async def cycles(studio, n: int, sessions: list) -> None:
    """`n` times: connect a viewer, receive one frame, hang up; keep weak references to the sessions."""
    for _ in range(n):
        async with StudioViewer(studio.url, **TINY) as viewer:
            await viewer.wait_frames(1, timeout=30)
            sessions.append(weakref.ref(studio.sessions[viewer.session_id]))
        assert await wait_no_sessions(studio, timeout=15)


def check_no_leaks(studio, n: int, max_late_growth_mib: float) -> dict:
    """Threads and session objects must come back to where they were; RSS may rise while allocator pools and
    codec caches fill (measured: +70 to +90 MiB over the first ~100 sessions, then flat: +1 MiB over sessions
    200-300) but must level off: the last third of the cycles may add at most `max_late_growth_mib`, and (over
    enough cycles) less than the first third did, or under 16 MiB. When the first third shrinks (the process
    gave memory back from earlier tests in the module: -32 MiB seen under load) it sets no scale to compare with,
    and only the absolute bounds apply."""
    sessions: list = []
    thirds = [n // 3, n // 3, n - 2 * (n // 3)]

    async def scenario():
        await cycles(studio, 5, [])  # warm up: executor threads, codecs, renderer caches
        gc.collect()
        threads0, rss = threading.active_count(), [rss_bytes()]
        started = time.monotonic()
        for k in thirds:
            await cycles(studio, k, sessions)
            await asyncio.sleep(1.0)  # aiortc's transports finish closing
            gc.collect()
            rss.append(rss_bytes())
        return threads0, threading.active_count(), rss, time.monotonic() - started

    threads0, threads1, rss, seconds = asyncio.run(scenario())
    alive = sum(1 for ref in sessions if ref() is not None)
    assert not studio.sessions and httpx.get(f"{studio.url}/api/health", timeout=60).json()["sessions"] == 0
    assert threads1 <= threads0 + 2, f"threads grew from {threads0} to {threads1} over {n} sessions"
    assert alive <= 2, f"{alive} of {n} closed sessions are still referenced"
    first, last = (rss[1] - rss[0]) / 2**20, (rss[3] - rss[2]) / 2**20
    growth = f"+{first:.0f} MiB over the first {thirds[0]} sessions, +{last:.0f} MiB over the last {thirds[2]}"
    assert last < max_late_growth_mib, f"RSS still growing: {growth}"
    if n >= 50:  # enough sessions for the trend to show through the noise
        assert last < max(first, 0) or last < 16, f"RSS growth is not levelling off: {growth}"
    return {"cycles": n, "seconds": round(seconds, 1), "threads": (threads0, threads1),
            "rss_mib": [round(r / 2**20) for r in rss]}


def test_connect_disconnect_cycles_leave_nothing_behind(studio):
    check_no_leaks(studio, 8, max_late_growth_mib=40)


@pytest.mark.slow
def test_hundreds_of_connect_disconnect_cycles_leave_nothing_behind(studio):
    figures = check_no_leaks(studio, 150, max_late_growth_mib=40)
    print(figures)


def heavy_parseq_schedule(last_frame: int) -> dict:
    """A ~1 KB Parseq export that the importer evaluates frame by frame: seconds of CPU."""
    return parseq_export([parseq_prompt(f"P{i}", style, i * last_frame // 4, (i + 1) * last_frame // 4 + 7, kind="none")
                          for i, style in enumerate(["cyberpunk", "volcano", "polar", "infrared"])], last_frame)


def test_a_heavy_schedule_message_does_not_stall_other_sessions(studio, monkeypatch):
    """Schedules sent over the data channel are parsed by the session's worker, not on the event loop that
    carries every session's video and signalling. The parse is held open until the test lets it go, so the
    check does not depend on how fast this machine parses: were it on the loop, nothing else would answer."""
    import studio.server.commands as commands
    parse, entered, release, where = commands.schedule_from_value, threading.Event(), threading.Event(), []

    def held_parse(*args, **kwargs):
        where.append(threading.current_thread())
        entered.set()
        release.wait(30)
        return parse(*args, **kwargs)
    monkeypatch.setattr(commands, "schedule_from_value", held_parse)

    async def scenario():
        async with StudioViewer(studio.url, **TINY) as bystander, StudioViewer(studio.url, **TINY) as heavy:
            await bystander.wait_frames(5)
            await heavy.wait_frames(1)
            mark = await heavy.send({"type": "schedule", "schedule": heavy_parseq_schedule(100_000)})
            try:
                assert await asyncio.to_thread(entered.wait, 20), "the schedule was never parsed"
                n = len(bystander.frames)
                async with httpx.AsyncClient(base_url=studio.url, timeout=60) as http:
                    assert (await http.get("/api/health", timeout=10)).status_code == 200
                await bystander.wait_frames(n + 20, timeout=10)
                assert not any(m.get("request") == "schedule" for m in heavy.messages[mark:])
            finally:
                release.set()
            await heavy.wait_message("ack", timeout=120, after=mark, request="schedule")
            assert where[0].name != "studio-server", "the schedule was parsed on the studio's event loop"
        assert await wait_no_sessions(studio, timeout=20)
    asyncio.run(scenario())
