"""/metrics speaks Prometheus through prometheus_client, and /api/health reports the installed version."""

from __future__ import annotations

import asyncio
from importlib.metadata import version

import httpx
import pytest
import torch

from helpers.browser import ADMIN, AS_ADMIN
from helpers.prom import AS_SCRAPER, SCRAPER, samples
from helpers.sessions import wait_no_sessions
from studio.server import Settings
from studio.server.background import BackgroundServer
from webrtc.client import StudioViewer


@pytest.fixture(scope="module")
def studio():
    torch.set_num_threads(1)
    with BackgroundServer(Settings(port=0, max_sessions=1, admin_token=ADMIN, metrics_token=SCRAPER)) as server:
        yield server


def test_metrics_have_histograms_of_render_time_latency_and_first_frame(studio):
    async def scenario():
        async with StudioViewer(studio.url, size="64x32", source="demo", keep_pixels=False) as viewer:
            await viewer.wait_frames(8)
            async with httpx.AsyncClient(base_url=studio.url, timeout=60) as http:
                res = await http.get("/metrics", headers=AS_SCRAPER)
                health = (await http.get("/api/health", headers=AS_ADMIN)).json()
        assert await wait_no_sessions(studio)
        return res, health, viewer.session_id

    res, health, session_id = asyncio.run(scenario())
    assert res.headers["content-type"].startswith("text/plain; version=0.0.4")
    m = samples(res.text)
    ref = 'renderer="reference"'
    assert m[f"alaya_chunk_render_seconds_count{{{ref}}}"] >= 2
    assert m[f"alaya_chunk_render_seconds_sum{{{ref}}}"] > 0
    assert m[f"alaya_frame_latency_seconds_count{{{ref}}}"] >= 8
    count = m[f"alaya_frame_latency_seconds_count{{{ref}}}"]
    assert m[f'alaya_frame_latency_seconds_bucket{{le="+Inf",{ref}}}'] == count
    assert m[f"alaya_time_to_first_frame_seconds_count{{{ref}}}"] == 1
    assert m["alaya_sessions_active"] == 1 and m["alaya_sessions_started_total"] >= 1
    assert m[f'alaya_session_frames_sent_total{{{ref},session="{session_id}"}}'] >= 8
    assert health["version"] == version("alaya-studio")
    assert health["renderer_info"] == {"name": "reference", "chunk_size": 1, "device": "cpu", "backend": "gl",
                                       "gl_renderer": health["renderer_info"]["gl_renderer"]}
    assert health["renderer_info"]["gl_renderer"].startswith("llvmpipe")   # Mesa on this machine's CPU
