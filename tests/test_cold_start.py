"""A first visitor who never waits for a warm-up (issue 25): the studio pays the default session's one-off costs
before /api/health says `ready`, so the first session compiles no GL program and builds no world; engine sessions
of one seed share the world and its mesh. (Its time to first frame is a figure: bench/cold_start_bench.py.)"""

from __future__ import annotations

import logging
import threading

import httpx
import numpy as np
import pytest

from gbuffer.engine import meshes
from gbuffer.engine.source import EngineSource
from gbuffer.feed import FeedHub, FeedLimits
from prompt_presets import matching
from prompt_presets.matching import matching_ready
from helpers.browser import wait_until
from helpers.loop import LoopThread
from helpers.watch import start_owner
from studio.server import Settings
from studio.server.background import BackgroundServer
from studio.server.control import MAX_HELD
from studio.server.planner import SessionPlanner


def counting_mesh_builds(monkeypatch) -> list:
    built = []
    real = meshes.build_world_mesh

    def build(world):
        built.append(world.seed)
        return real(world)
    monkeypatch.setattr(meshes, "build_world_mesh", build)
    return built


def test_engine_sessions_of_one_seed_share_the_world_and_its_mesh(monkeypatch):
    built = counting_mesh_builds(monkeypatch)
    first, second = EngineSource(96, 64, seed=11), EngineSource(96, 64, seed=11)
    try:
        assert first.world is second.world and EngineSource(96, 64, seed=12).world is not first.world
        a, b = first.next_frame(), second.next_frame()
        assert built == [11]                                  # meshed once, by the first
        assert np.array_equal(a.data, b.data)                 # and both draw the same world
        vertices, _ = meshes.world_mesh(first.world)
        assert not vertices.flags.writeable                   # shared: nobody may change it
    finally:
        first.close()
        second.close()


def test_the_warm_up_marks_the_studio_ready_also_when_the_renderer_cannot_load(caplog):
    planner = SessionPlanner(Settings(renderer_options={"backend": "vulkan"}), FeedHub(FeedLimits(64 * 64, 30)))
    assert not planner.warmed.is_set()
    with caplog.at_level(logging.WARNING, "alaya.server"):
        planner.warm_up()
    assert planner.warmed.is_set() and "warm-up of renderer 'reference' incomplete" in caplog.text
    assert "vulkan" in caplog.text and "\n" not in caplog.records[-1].getMessage()


def test_once_ready_the_first_session_compiles_no_program_and_builds_no_world(monkeypatch):
    with BackgroundServer(Settings(port=0, max_sessions=1, width=96, height=64)) as studio:
        wait_until(lambda: httpx.get(f"{studio.url}/api/health", timeout=30).json()["ready"], 120, "ready")
        renderer = studio.app.state.sessions.loaded_renderer("reference")
        if renderer.shader is None:                          # no EGL here: the torch path has nothing to compile
            programs = None
        else:
            programs = set(renderer.shader._programs)
            assert programs, "the warm-up compiled the default style's programs"
        built = counting_mesh_builds(monkeypatch)
        loop = LoopThread()
        try:
            owner = loop.run(start_owner(studio.url, source="demo", size="96x64"))   # what a visitor's page asks
            loop.run(owner.close())
        finally:
            loop.close()
        assert built == []
        if programs is not None:
            assert set(renderer.shader._programs) == programs


@pytest.mark.parametrize("warm", [False, True])
def test_health_says_when_free_text_matching_is_warm(warm):
    """A soak or a load balancer waits on it: null when the server does not warm the matcher up, else false until
    the background warm-up is over and true after."""
    with BackgroundServer(Settings(port=0, max_sessions=1, width=96, height=64, warm_text_matching=warm)) as studio:
        def health():
            return httpx.get(f"{studio.url}/api/health", timeout=30).json()
        if not warm:
            assert health()["text_matching_ready"] is None
        else:
            assert health()["text_matching_ready"] in (False, True)
            wait_until(lambda: health()["text_matching_ready"] is True, 300, "the matcher's warm-up")
            assert matching_ready()


@pytest.fixture
def cold_matcher(monkeypatch):
    """The free-text matcher as a fresh studio has it: not loaded, no warm-up under way (this process may have
    loaded it for another test). The model this test loads is closed after it."""
    monkeypatch.setattr(matching, "_state", {})
    monkeypatch.setattr(matching, "_threads", {})
    monkeypatch.setattr(matching, "_ready", threading.Event())
    monkeypatch.setattr(matching, "_settled", threading.Event())
    monkeypatch.setattr(matching, "_loading", set())
    monkeypatch.setattr(matching, "_preset_vectors", {})
    yield
    model = matching._state.get("model")
    if model is not None:
        model.close()


def test_a_switch_asked_after_free_text_that_waits_for_the_matcher_is_not_undone_by_it(cold_matcher):
    """A visitor types free text in the studio's first seconds (it waits for the matcher) and then clicks a tile:
    the tile, asked last, is what plays once both are applied; before, the free text landed last and undid it."""
    settings = Settings(port=0, max_sessions=1, width=96, height=64, warm_text_matching=False)
    with BackgroundServer(settings) as studio:
        loop = LoopThread()
        try:
            owner = loop.run(start_owner(studio.url, source="demo", size="96x64"))
            mark = loop.run(owner.send({"type": "prompt", "text": "a lighthouse on a cliff in fog", "transition": 0}))
            loop.run(owner.send({"type": "preset", "name": "polar", "transition": 0}))
            loop.run(owner.wait_message("preparing", after=mark))       # the free text did wait for the matcher
            loop.run(owner.wait_message("ack", 300, after=mark, request="prompt"))
            tile = loop.run(owner.wait_message("ack", 60, after=mark, request="preset"))
            acks = [m["request"] for m in owner.messages[mark:] if m.get("type") == "ack"]
            assert acks == ["prompt", "preset"], acks
            after = loop.run(owner.wait_until(
                lambda: [m for m in owner.statuses() if m["frame"] >= tile["frame"]], 60, "a frame of the tile"))
            assert after[0]["label"] == "polar", after[0]
            loop.run(owner.close())
        finally:
            loop.close()


def test_a_flood_of_switches_while_the_matcher_loads_is_refused_past_a_bound_not_kept(cold_matcher):
    """Switches asked while free text waits for the matcher are kept in order, so they must not pile up without
    bound: past MAX_HELD each is refused in one line, and those kept are applied once it is ready."""
    settings = Settings(port=0, max_sessions=1, width=96, height=64, warm_text_matching=False)
    with BackgroundServer(settings) as studio:
        loop = LoopThread()
        try:
            owner = loop.run(start_owner(studio.url, source="demo", size="96x64"))
            mark = len(owner.messages)
            for i in range(MAX_HELD + 3):
                loop.run(owner.send({"type": "prompt", "text": f"a lighthouse number {i} in fog", "transition": 0}))
            def answers(kind: str) -> list[dict]:
                return [m for m in owner.messages[mark:] if m.get("type") == kind]
            loop.run(owner.wait_until(lambda: len(answers("ack")) == MAX_HELD, 300, "the kept switches' acks"))
            refused = answers("error")
            assert len(refused) == 3 and all(f"{MAX_HELD} switches already wait" in m["message"] and
                                              "\n" not in m["message"] and m["request"] == "prompt"
                                              for m in refused), refused
            loop.run(owner.close())
        finally:
            loop.close()
