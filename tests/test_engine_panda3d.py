"""Panda3D as an engine: its one-pass G-buffer reads back by the encoding's rules, and `alaya-studio engine
panda3d` streams paired frames into a real studio that a session renders. Offscreen, no display (EGL)."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys

import numpy as np
import pytest
import torch

pytest.importorskip("panda3d")

from gbuffer.encoding import encode_depth, encode_normal, encode_unit  # noqa: E402
from gbuffer.formats import write_npy_windows  # noqa: E402
from gbuffer.frame import CHANNEL_INDEX  # noqa: E402
from gbuffer.input import PlayerInput  # noqa: E402
from gbuffer.panda3d import Panda3DSource  # noqa: E402
from gbuffer.panda3d.display import panda3d_core  # noqa: E402
from gbuffer.panda3d.gbuffer_pass import GBufferPass  # noqa: E402
from gbuffer.panda3d.scene import START, STUCK_S, TICK_HZ, DrivingScene  # noqa: E402
from helpers.waiting import wait_until  # noqa: E402
from renderer.reference.synthetic import synthetic_gbuffer  # noqa: E402
from studio.server import Settings  # noqa: E402
from studio.server.background import BackgroundServer  # noqa: E402
from webrtc.client import StudioViewer  # noqa: E402

pytestmark = pytest.mark.gl
TOKEN = "panda-token"
W, H = 96, 64


def _card(core, root, name, frame, material):
    maker = core.CardMaker(name)
    maker.set_frame(*frame)
    card = root.attach_new_node(maker.generate())
    m = core.Material()
    m.set_base_color(core.LColor(*material["base"], 1.0))
    m.set_roughness(material["roughness"])
    m.set_metallic(material["metallic"])
    card.set_material(m, 1)
    return card


def _channel(data, name):
    return data[CHANNEL_INDEX[name]].astype(int)


def test_a_known_scene_reads_back_by_the_encoding_rules():
    """A wall of known material 6 m ahead (facing the camera) over a floor, sky above: each channel within two
    levels of gbuffer/encoding.py's value for it, rows top first."""
    core = panda3d_core()
    root = core.NodePath("known")
    wall = dict(base=(0.6, 0.3, 0.2), roughness=0.4, metallic=0.7)
    floor = dict(base=(0.2, 0.5, 0.3), roughness=0.9, metallic=0.0)
    card = _card(core, root, "wall", (-1.5, 1.5, -1.0, 1.0), wall)
    card.set_pos(0, 6.0, 0)              # CardMaker cards lie in x-z facing -y: towards a camera at the origin
    ground = _card(core, root, "floor", (-40, 40, -40, 40), floor)
    ground.set_hpr(0, -90, 0)            # lying flat, facing up
    ground.set_z(-1.0)
    gbuffer = GBufferPass(root, W, H)
    try:
        gbuffer.draw()
        data, rgb = gbuffer.read()
    finally:
        gbuffer.close()
    centre = (slice(H // 2 - 3, H // 2 + 3), slice(W // 2 - 3, W // 2 + 3))
    expected = {"albedo": np.round(np.array(wall["base"]) * 255), "depth": encode_depth(np.float32(6.0)),
                "metallic": encode_unit(wall["metallic"]), "roughness": encode_unit(wall["roughness"]),
                "normal": encode_normal(np.array([0.0, 0.0, 1.0]))}
    for name, value in expected.items():
        got = _channel(data, name)[centre]
        assert np.abs(got - value).max() <= 2, (name, got[0, 0], value)
    bottom = (slice(H - 3, H), slice(0, W))       # the floor, seen below the wall: its normal is view-space up
    assert np.abs(_channel(data, "normal")[bottom] - encode_normal(np.array([0.0, 1.0, 0.0]))).max() <= 2
    assert np.abs(_channel(data, "roughness")[bottom] - encode_unit(floor["roughness"])).max() <= 2
    top = (slice(0, 3), slice(0, W))              # sky: depth 0, not metallic, fully rough
    assert (_channel(data, "depth")[top] == 0).all() and (_channel(data, "roughness")[top] == 255).all()
    lit = rgb[centre].reshape(-1, 3).astype(int)            # the lit wall: even, neither black nor white
    assert rgb.shape == (H, W, 3) and np.ptp(lit, axis=0).max() <= 2 and 20 < lit.mean() < 235


def test_the_car_drives_by_player_input_and_frames_carry_the_lit_image():
    with Panda3DSource(width=W, height=H, fps=30) as game:
        frames = iter(game)
        first = next(frames)
        assert first.rgb is not None and first.meta["cruise"]
        game.apply_input(PlayerInput(throttle=1.0))
        for _ in range(45):
            moving = next(frames)
        assert not moving.meta["cruise"] and moving.meta["speed"] > 1.0, moving.meta
        assert np.abs(moving.data.astype(int) - first.data.astype(int)).mean() > 1   # the view changed
        game.apply_input(PlayerInput(reset=True))
        back = next(frames)
        assert np.hypot(back.meta["position"][0] - START[0], back.meta["position"][1] - START[1]) < 0.5


def test_a_car_held_at_rest_on_the_handbrake_is_not_stuck_but_one_driven_into_the_wall_is():
    """Stuck means driven and not moving (or not on its wheels) for STUCK_S: Space at a standstill is a driver
    waiting, full throttle into the valley wall north of the start is a wedged car. The scene's physics alone, tick
    by tick: no GL buffer (another EGL context in this process is one more chance for the driver to crash)."""
    scene = DrivingScene()
    for _ in range(int((STUCK_S + 1) * TICK_HZ)):
        scene.step(PlayerInput(brake=1.0, handbrake=True))
    waiting = scene.state()
    assert waiting["stuck_resets"] == 0 and abs(waiting["speed"]) < 0.3, waiting
    furthest = 0.0
    for _ in range(20 * TICK_HZ):
        scene.step(PlayerInput(throttle=1.0))
        state = scene.state()
        furthest = max(furthest, state["position"][1] - START[1])
        if state["stuck_resets"]:
            break
    assert state["stuck_resets"] == 1 and furthest > 25, (furthest, state)
    assert np.hypot(state["position"][0] - START[0], state["position"][1] - START[1]) < 0.5


# ---- against a studio ------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def studio(tmp_path_factory):
    torch.set_num_threads(1)
    data = tmp_path_factory.mktemp("data")
    write_npy_windows((synthetic_gbuffer(160, 96, i / 30, i) for i in range(16)), data / "drive")
    with BackgroundServer(Settings(port=0, max_sessions=2, data_dir=data, token=TOKEN)) as server:
        async def warm_up():  # a first session loads what sessions share, so it does not land mid-feed
            async with StudioViewer(server.url, source="drive", size="160x96", keep_pixels=False) as viewer:
                await viewer.wait_frames(3)
        asyncio.run(warm_up())
        yield server


def _engine(studio, *extra: str, url: str | None = None) -> list[str]:
    return [sys.executable, "-m", "studio.cli", "engine", "panda3d", "--connect",
            url or f"{studio.ws_url}/api/engine/feed", "--size", "160x96", *extra]


def test_panda3d_streams_paired_frames_that_a_session_renders_and_drives(studio):
    engine = subprocess.Popen(_engine(studio, "--frames", "150", "--token", TOKEN), stderr=subprocess.PIPE,
                              text=True)
    try:
        wait_until(lambda: "panda3d" in studio.app.state.feeds.names(), 60, "the panda3d engine to connect")
        arrived = studio.app.state.feeds.get("panda3d").wait_frame(0, timeout=60)
        assert arrived is not None and arrived.rgb is not None and arrived.rgb.shape == (96, 160, 3)  # paired

        async def scenario():
            async with StudioViewer(studio.url, source="feed:panda3d", size="160x96", stamp=True) as viewer:
                hello = await viewer.wait_message("hello")
                assert hello["live"] and hello["source"] == "feed:panda3d"
                await viewer.wait_frames(60)
                for key, down in [("up", True), ("left", True), ("left", False), ("up", False)]:
                    await viewer.send({"type": "key", "key": key, "down": down})
                await viewer.wait_message("ended", timeout=60)
        try:
            asyncio.run(scenario())
        except (TimeoutError, AssertionError) as exc:      # say what the engine saw too
            engine.kill()
            raise AssertionError(f"{exc}; the engine said: {engine.communicate()[1]}") from exc
        _, err = engine.communicate(timeout=60)
    finally:
        engine.kill()
    assert engine.returncode == 0, err
    assert "sent 150 frames" in err, err
    assert int(err.split("frames; ")[1].split(" inputs")[0]) >= 4, err


def test_panda3d_receives_its_styled_frames_back_and_reports_round_trips(studio):
    """The report's loop in Panda3D: offscreen, 90 frames out, the styled frames back into a window of its own."""
    out = subprocess.run(_engine(studio, "--frames", "90", "--token", TOKEN, "--receive", "--prompt", "volcano",
                                 "--format", "jpeg"), capture_output=True, text=True, timeout=300,
                         env={k: v for k, v in __import__("os").environ.items() if k != "DISPLAY"})
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout.strip().splitlines()[-1])
    assert report["frames_sent"] == 90, report
    # latest frame wins, so a loaded machine may skip some; the last one sent always comes back
    assert 10 <= report["frames_received"] <= 90 and report["frames_shown"] >= 1, report
    assert 0 < report["roundtrip_p50_ms"] <= report["roundtrip_p95_ms"], report
    assert "drawn offscreen" in out.stderr and "watch it at /studio/watch/" in out.stderr, out.stderr
    wait_until(lambda: not any(s.source_name == "feed:panda3d" for s in studio.sessions.values()), 30,
               "the engine's session to end with its feed")


def test_the_styled_window_draws_what_it_is_shown_offscreen():
    from gbuffer.panda3d.window import FrameWindow

    window = FrameWindow(W, H, "test", offscreen=True)
    try:
        image = np.zeros((H, W, 3), np.uint8)
        image[: H // 2] = (200, 40, 10)                     # top half orange, bottom half blue: rows top first
        image[H // 2:] = (10, 60, 220)
        window.show(image)
        window.engine.render_frame()
        shown = window.shown()
        assert shown is not None and np.abs(shown.astype(int) - image.astype(int)).max() <= 2
    finally:
        window.close()


@pytest.mark.parametrize("extra, url, match", [
    ((), "http://127.0.0.1:1/api/engine/feed", "not a ws:// or wss:// URL"),
    (("--token", "wrong"), None, "token"),
    (("--receive", "--token", TOKEN, "--prompt", "volcano", "--size", "161x97"), None, "multiples of 2"),
    (("--show", "--token", TOKEN), None, "--show: cannot open a window"),
])
def test_bad_engine_arguments_get_one_line(studio, extra, url, match, monkeypatch):
    out = subprocess.run(_engine(studio, *extra, url=url), capture_output=True, text=True, timeout=120,
                         env={k: v for k, v in __import__("os").environ.items() if k != "DISPLAY"})
    assert out.returncode == 2, out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and match in lines[0], out.stderr
