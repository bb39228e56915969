"""The batch thread of BatchedRenderer (renderer/batching.py): sessions rendering from their own threads, as
live sessions do, share passes; a session's frames do not depend on its batch; a bad chunk fails its own
session only; sessions come and go."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from helpers.torch_threads import one_torch_thread, random_frames  # noqa: F401
from prompt_presets import conditioning_for
from prompt_presets.conditioning import Conditioning
from renderer import RendererError, create_renderer
from renderer.batching import BatchedRenderer, batch_function

PROMPTS = ["a red brick city at noon", "a blue ice cave"]


def in_threads(*jobs):
    """Run the jobs at once, each on its own thread (as live sessions' workers do); → their results."""
    results, start = [None] * len(jobs), threading.Barrier(len(jobs))

    def run(i, job):
        start.wait()
        try:
            results[i] = job()
        except Exception as exc:  # noqa: BLE001 - returned for the test to look at
            results[i] = exc
    threads = [threading.Thread(target=run, args=(i, job)) for i, job in enumerate(jobs)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    return results


def test_flash_sessions_on_their_own_threads_share_passes_and_render_as_alone():
    inner = create_renderer("flash", prompts=PROMPTS, chunk_size=8)
    streams = [[random_frames(8, 8 * k, seed=10 * s + k) for k in range(3)] for s in range(2)]
    conds = [[Conditioning.single(PROMPTS[s])] * 8 for s in range(2)]
    alone = []
    for s in range(2):
        with inner.open_session(64, 32, seed=s) as session:
            alone.append([session.render(chunk, conds[s]).rgb for chunk in streams[s]])

    batched = BatchedRenderer(inner, batch_function("flash"), max_wait_s=30.0)  # generous: both always meet
    sessions = [batched.open_session(64, 32, seed=s) for s in range(2)]
    try:
        got = in_threads(*[lambda s=s: [sessions[s].render(c, conds[s]).rgb for c in streams[s]] for s in range(2)])
    finally:
        for session in sessions:
            session.close()
        batched.close()
    assert batched.stats.sizes == [2, 2, 2]            # every chunk went in a pass with the other session's
    for s in range(2):
        for k in range(3):
            assert np.abs(got[s][k].astype(np.int16) - alone[s][k].astype(np.int16)).max() <= 2, (s, k)


def test_a_bad_chunk_fails_its_own_session_only():
    batched = BatchedRenderer(create_renderer("reference"), batch_function("reference"), max_wait_s=5.0)
    good, bad = batched.open_session(64, 32), batched.open_session(64, 32)
    ok, failed = in_threads(lambda: good.render(random_frames(1, 0, 1), [conditioning_for("polar")]),
                            lambda: bad.render(random_frames(1, 0, 2), []))          # no conditioning for its frame
    assert isinstance(failed, RendererError) and "1 frames but 0 conditionings" in str(failed)
    assert ok.rgb.shape == (1, 32, 64, 3)
    assert batched.stats.sizes == [2]
    batched.close()


def test_a_lone_session_never_waits_and_sessions_come_and_go():
    batched = BatchedRenderer(create_renderer("reference"), batch_function("reference"), max_wait_s=30.0)
    first = batched.open_session(64, 32)
    t0 = time.monotonic()
    for k in range(3):               # alone: each chunk at once
        first.render(random_frames(1, k, 1), [conditioning_for("polar")])
    assert time.monotonic() - t0 < 25, "a lone session waited for a batch"      # each wait would be 30 s
    second = batched.open_session(64, 32)
    in_threads(lambda: first.render(random_frames(1, 3, 1), [conditioning_for("polar")]),
               lambda: second.render(random_frames(1, 0, 2), [conditioning_for("volcano")]))
    first.close()                    # leaves: the other renders alone again, with no wait for it
    t0 = time.monotonic()
    second.render(random_frames(1, 1, 2), [conditioning_for("volcano")])
    assert time.monotonic() - t0 < 25, "a session waited for one that had left"
    assert batched.stats.sizes == [1, 1, 1, 2, 1]
    assert batched.describe()["batching"]["sessions"] == 1
    batched.close()
    with pytest.raises(RendererError, match="the batch thread is stopped"):
        second.render(random_frames(1, 2, 2), [conditioning_for("volcano")])


def test_a_studio_with_batching_streams_two_viewers_through_shared_passes():
    import asyncio

    from helpers.sessions import wait_no_sessions
    from studio.server import Settings
    from studio.server.background import BackgroundServer
    from webrtc.client import StudioViewer

    async def scenario(studio):
        async with StudioViewer(studio.url, source="demo", size="64x32", prompt="polar", keep_pixels=False) as a, \
                StudioViewer(studio.url, source="demo", size="64x32", prompt="volcano", keep_pixels=False) as b:
            await a.wait_frames(20)
            await b.wait_frames(20)
            renderer = studio.app.state.sessions.loaded_renderer("reference")
            assert 2 in renderer.stats.sizes, renderer.stats.sizes     # the two sessions shared passes
            assert {s["label"] for s in a.statuses()} == {"polar"} and {s["label"] for s in b.statuses()} == {"volcano"}
        assert await wait_no_sessions(studio, 60)

    # a long wait, so two open sessions always meet: what is tested is that they do, and stream on
    with BackgroundServer(Settings(port=0, max_sessions=2, batch_wait_ms=1000, warm_text_matching=False)) as studio:
        asyncio.run(scenario(studio))
        info = studio.app.state.sessions.loaded_renderer("reference").describe()
        assert info["batching"] == {"max_wait_ms": 1000.0, "max_batch": 4, "sessions": 0}


def test_each_backend_batches_as_its_spec_says():
    from renderer.batching import render_each
    from renderer.flash.batch import render_batch

    assert batch_function("flash") is render_batch
    assert batch_function("reference") is render_each        # independent frames: no shared pass
    with pytest.raises(RendererError, match="unknown renderer 'magic'; choose one of reference, flash"):
        batch_function("magic")
