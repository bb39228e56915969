"""What a live session owns is released when it ends, not whenever the garbage collector gets to it (issue 29).

A closed session and its peer connection are garbage in reference cycles (aiortc's own objects form them too),
which only a full collection frees; in a studio whose heap holds torch and Gradio those come rarely. Whatever
native a session holds must therefore be released by its end itself: the video codec and its threads, the
frames waiting in its track and its encoder cache, its engine's GL context. These tests hold the collector off
while sessions run and end, then look at exactly those parts; then they let it run and check that nothing of
the sessions is left at all.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import os
import platform
import subprocess
import sys
import threading
import weakref
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from helpers.sessions import wait_no_sessions
from gbuffer.engine.raster import CONTEXTS
from gbuffer.formats.pictures import yuv420p
from studio.server import Settings
from studio.server.allocator import ARENAS
from studio.server.background import BackgroundServer
from webrtc.client import StudioViewer, WhepViewer
from webrtc.encoders import EncoderSettings
from webrtc.fanout import SharedEncoder
from webrtc.track import VIDEO_CLOCK

ROOT = Path(__file__).resolve().parents[1]
N = 3                        # sessions at once
# the built-in engine (a GL raster each); from 192x128 on, libx264 runs four threads per encoder on this machine
VIEW = {"source": "demo", "size": "192x128", "keep_pixels": False}


def native_threads() -> int:
    """Threads of this process that Python did not start (codec, GL and library threads)."""
    return len(os.listdir("/proc/self/task")) - threading.active_count()


@contextlib.contextmanager
def collector_off():
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


async def wait_for(predicate, timeout: float, what: str) -> None:
    """A bound for a hang, not a speed: on main the condition below never comes true without a collection."""
    deadline = asyncio.get_running_loop().time() + timeout
    while not predicate():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"{what} after {timeout:g} s")
        await asyncio.sleep(0.1)


@pytest.fixture(scope="module")
def studio():
    with BackgroundServer(Settings(port=0, max_sessions=N, warm_text_matching=False, connect_timeout_s=20)) as s:
        yield s


async def concurrent_sessions(studio, seed: int, watch: bool = False) -> list[dict]:
    """N viewers at once (with a WHEP player each when `watch`), a few frames, all hang up; → per session, weak
    references to what it owned, and its encoders (which the test then inspects)."""
    viewers = [StudioViewer(studio.url, seed=seed + i, **VIEW) for i in range(N)]
    players: list[WhepViewer] = []
    owned = []
    try:
        await asyncio.gather(*(v.start() for v in viewers))
        await asyncio.gather(*(v.wait_frames(5) for v in viewers))
        if watch:
            hellos = [await v.wait_message("hello") for v in viewers]
            players = [WhepViewer(studio.url, v.session_id, h["watch"]["key"], keep_pixels=False)
                       for v, h in zip(viewers, hellos)]
            await asyncio.gather(*(p.start() for p in players))
            await asyncio.gather(*(p.wait_frames(3) for p in players))
        for v in viewers:
            s = studio.sessions[v.session_id]
            parts = {"session": s, "peer": s.pc, "track": s.track, "rollout": s.rollout, "source": s.rollout.source,
                     "audience": s.audience, **{f"watcher peer {i}": w.pc for i, w in
                                                enumerate(s.audience.watchers.values())}}
            owned.append({"refs": {name: weakref.ref(obj) for name, obj in parts.items()},
                          "encoders": list(s.audience.fanout.encoders.by_codec.values()),
                          "buffer": s.buffer, "raster": s.rollout.source._raster})
            del s, parts
    finally:
        await asyncio.gather(*(p.stop() for p in players), return_exceptions=True)
        await asyncio.gather(*(v.close() for v in viewers))
    assert await wait_no_sessions(studio, timeout=60)
    return owned


def released_at_end(owned: list[dict]) -> None:
    for o in owned:
        assert o["encoders"], "the session encoded nothing"
        for encoder in o["encoders"]:
            assert encoder.inner.codec is None, "the session's codec outlived it"
            assert not encoder._cache, "encoded frames outlived the session"
        assert o["buffer"].queued == 0, "frames rendered for the session outlived it"
        source = o["refs"]["source"]()
        assert source is None or source._raster is None, "the engine's raster outlived the session"
        del source
        raster = o["raster"]
        assert raster.ctx is None and not raster._objects, "the raster's GL objects outlived the session"


async def nothing_left(owned: list[dict]) -> None:
    """Once the manager's end() calls have finished (the last step, returning free memory, runs after the
    session count is 0), a full collection leaves nothing of the sessions."""
    def left() -> list[str]:
        gc.collect()
        return [name for o in owned for name, ref in o["refs"].items() if ref() is not None]
    await wait_for(lambda: not left(), 30, "something of the sessions still alive after a full collection")


def test_concurrent_sessions_release_their_codecs_threads_frames_and_gl_when_they_end(studio):
    async def scenario():
        await concurrent_sessions(studio, seed=100)   # the process's pools (executor, GL, codecs) are warm now
        gc.collect()
        threads, contexts = native_threads(), CONTEXTS.opened
        for round_no in range(2):
            with collector_off():
                owned = await concurrent_sessions(studio, seed=10 * round_no)
                # libx264 runs threads per open encoder: back to the baseline once the codecs are freed
                await wait_for(lambda: native_threads() <= threads, 30,
                               f"native threads {native_threads()} > {threads} with the sessions gone")
                released_at_end(owned)
            await nothing_left(owned)
            del owned
        # the engines' GL contexts were reused: opening and releasing one leaks inside moderngl and Mesa
        assert CONTEXTS.opened == contexts, f"{CONTEXTS.opened - contexts} new GL contexts for the later sessions"
        assert CONTEXTS.idle >= N
    asyncio.run(scenario())


def test_sessions_with_watchers_release_the_shared_encoder_and_every_peer(studio):
    async def scenario():
        with collector_off():
            owned = await concurrent_sessions(studio, seed=40, watch=True)
            assert all(any(k.startswith("watcher") for k in o["refs"]) for o in owned)
            released_at_end(owned)
        await nothing_left(owned)
    asyncio.run(scenario())


def test_a_closed_shared_encoder_holds_no_codec_and_encodes_nothing():
    encoder = SharedEncoder("video/H264", EncoderSettings.for_session(64, 48, 30))
    frame = yuv420p(np.zeros((48, 64, 3), np.uint8))
    frame.pts, frame.time_base = 0, Fraction(1, VIDEO_CLOCK)
    payloads, _ = encoder.encode(frame)
    assert payloads and encoder.inner.codec is not None
    encoder.close()
    assert encoder.inner.codec is None and not encoder._cache
    frame.pts = 3000
    assert encoder.encode(frame) == ([], 0)


# Run in a fresh interpreter, so the arenas counted are the ones its threads made: 8 threads each hold a block
# while all of them are alive, then glibc's malloc_stats() prints an "Arena N:" section per arena on stderr.
ARENAS_OF_8_THREADS = """
import ctypes, sys, threading
from studio.server.allocator import limit_arenas

libc = ctypes.CDLL(None)
libc.malloc.restype, libc.free.argtypes = ctypes.c_void_p, [ctypes.c_void_p]
if sys.argv[1] == "limited":
    assert limit_arenas()
together = threading.Barrier(8)

def frame_maker():
    block = libc.malloc(64 << 10)     # below the mmap threshold: from this thread's arena
    together.wait()                   # all 8 threads hold a block at once
    libc.free(block)

threads = [threading.Thread(target=frame_maker) for _ in range(8)]
for t in threads:
    t.start()
for t in threads:
    t.join()
libc.malloc_stats()
"""


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="glibc's allocator")
@pytest.mark.parametrize("setting", ["default", "limited"])
def test_with_the_studios_setting_threads_share_two_arenas(setting):
    """glibc gives each new thread an arena of its own (up to 8 per core), where the blocks it frees stay between
    live ones; the studio (create_app) caps them at ARENAS, so sessions' threads reuse each other's freed frames."""
    out = subprocess.run([sys.executable, "-c", ARENAS_OF_8_THREADS, setting], capture_output=True, text=True,
                         cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=120)
    assert out.returncode == 0, out.stderr
    arenas = sum(line.startswith("Arena ") for line in out.stderr.splitlines())
    if setting == "limited":
        assert 1 <= arenas <= ARENAS, out.stderr
    else:
        assert arenas > ARENAS, out.stderr      # what the cap is for: glibc's own choice makes more
