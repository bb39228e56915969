"""Takes: a live session's input, schedule as played and output, recorded and re-rendered offline."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from dataclasses import replace

import httpx
import numpy as np
import pytest
import torch

from gbuffer.feed.client import FeedClient
from gbuffer.formats import open_sequence
from helpers.sessions import wait_no_sessions
from helpers.waiting import wait_until
from renderer.reference.synthetic import synthetic_gbuffer
from studio.cli import main as cli
from timeline.schedule import Schedule
from studio.server import Settings
from studio.server.background import BackgroundServer
from studio.takes import TakeStore, open_take
from studio.ui import mount_ui
from media.video import read_mp4_frames
from webrtc.client import StudioViewer

VIEW = {"size": "64x32", "source": "demo", "prompt": "polar"}


@pytest.fixture(scope="module")
def studio(tmp_path_factory):
    torch.set_num_threads(1)
    data = tmp_path_factory.mktemp("data")
    server = BackgroundServer(Settings(port=0, max_sessions=2, data_dir=data))
    mount_ui(server.app, cache_dir=tmp_path_factory.mktemp("cache"), prewarm_thumbnails=False)
    with server:
        yield server


@pytest.fixture(scope="module")
def take(studio):
    return record_take(studio)


def record_take(studio) -> tuple[dict, dict, str]:
    """Drive a take: start over the data channel, a live switch to volcano, stop over REST. → (stopped message,
    the switch's ack, the visitor's owner key: the take is that visitor's)."""
    async def scenario():
        async with StudioViewer(studio.url, **VIEW, keep_pixels=False) as viewer:
            await viewer.wait_frames(3)
            mark = await viewer.send({"type": "take", "action": "start"})
            started = await viewer.wait_message("ack", after=mark, request="take")
            assert started["recording"] and started["take_id"]
            await viewer.wait_until(lambda: any(m.get("type") == "status" and m.get("take", {}).get("frames", 0) >= 6
                                                for m in viewer.messages[mark:]), 60, "6 frames in the take")
            mark = await viewer.send({"type": "preset", "name": "volcano"})
            switched = await viewer.wait_message("ack", after=mark, request="preset")
            await viewer.wait_until(lambda: any(m.get("type") == "status" and m.get("label") == "volcano"
                                                and m["frame"] >= switched["frame"] + 6
                                                for m in viewer.messages[mark:]), 60, "6 volcano frames")
            async with httpx.AsyncClient(base_url=studio.url, timeout=60) as http:
                res = await http.post(f"/api/sessions/{viewer.session_id}/take", json={"action": "stop"},
                                      headers=viewer.auth)
                assert res.status_code == 200 and res.json()["recording"] is False, res.text
            stopped = await viewer.wait_message("take", state="stopped", timeout=60)
        assert await wait_no_sessions(studio)
        return stopped, switched, viewer.owner_key
    return asyncio.run(scenario())


def test_a_take_records_input_schedule_and_output_and_re_renders_the_same(studio, take, tmp_path):
    stopped, switched, _ = take
    take = studio.settings.takes_path / stopped["take_id"]
    assert stopped["path"] == f"takes/{stopped['take_id']}" and stopped["reason"] is None   # no server path
    meta = json.loads((take / "take.json").read_text())
    n = meta["frames"]
    assert n == stopped["frames"] >= 12 and (meta["width"], meta["height"], meta["renderer"]) == (64, 32, "reference")
    # the schedule as played: polar, then volcano from the take frame that played the switch's timeline frame
    schedule = Schedule.from_json(json.loads((take / "schedule.json").read_text()))
    switch_at = meta["timeline_frames"].index(switched["frame"])
    labels = [schedule.conditioning_at(k).label() for k in range(n)]
    assert labels == ["polar"] * switch_at + ["volcano"] * (n - switch_at)
    recorded = read_mp4_frames(take / "output.mp4")
    assert len(recorded) == n
    # re-rendered with the renderer it was recorded with: the same pictures, within codec tolerance
    out = tmp_path / "again.mp4"
    assert cli(["render", str(take), "-o", str(out), "--no-progress"]) == 0
    again = read_mp4_frames(out)
    assert len(again) == n
    diff = np.abs(np.stack(again).astype(np.int16) - np.stack(recorded).astype(np.int16))
    assert diff.mean() < 1.0, diff.mean()
    # and at another size: same frames, same order, the switch on the same frame
    bigger = tmp_path / "bigger.mp4"
    assert cli(["render", str(take), "-o", str(bigger), "--size", "128x64", "--no-progress",
                "--metrics", str(tmp_path / "m.json")]) == 0
    assert len(read_mp4_frames(bigger)) == n
    segments = json.loads((tmp_path / "m.json").read_text())["segments"]
    assert [(s["frame"], s["prompt"]) for s in segments] == [(0, "polar"), (switch_at, "volcano")]


def test_a_take_is_a_source_that_replays_live_with_its_schedule(studio, take):
    stopped, _, owner_key = take
    source = f"take:{stopped['take_id']}"
    with httpx.Client(base_url=studio.url, timeout=60) as http:
        assert source not in [c["id"] for c in http.get("/api/ui/sources").json()]   # another visitor's take
    with httpx.Client(base_url=studio.url, timeout=60, headers={"Authorization": f"Bearer {owner_key}"}) as http:
        listed = [c for c in http.get("/api/ui/sources").json() if c["id"] == source]
        assert len(listed) == 1 and listed[0]["kind"] == "take", listed
        assert f"{stopped['frames']} frames of demo, 64x32" in listed[0]["title"]
        played = http.get(f"/api/ui/takes/{stopped['take_id']}/schedule").json()
        assert [s["prompts"][0]["preset"] for s in played["segments"]] == ["polar", "volcano"]
        # names that are not takes, and paths dressed as take ids, are one-line errors
        for bad in ("take:nope", "take:../data", f"take:{stopped['take_id']}/../x"):
            res = http.post("/api/webrtc/offer", json={"sdp": "v=0\r\nm=video", "type": "offer", "source": bad})
            assert res.status_code == 400, res.text
            assert res.json()["error"] == f"source: no take {bad[5:]!r} in the takes folder"
        assert http.get("/api/ui/takes/nope/schedule").status_code == 400

    async def scenario():
        # no prompt and no schedule: the take plays with its own schedule, frame for frame
        async with StudioViewer(studio.url, source=source, size="64x32", keep_pixels=False, loop=False,
                                key=owner_key) as viewer:                      # the take's own visitor
            await viewer.wait_frames(stopped["frames"] // 2)
            async with httpx.AsyncClient(base_url=studio.url, timeout=60) as http:
                res = await http.get(f"/api/sessions/{viewer.session_id}/schedule", headers=viewer.auth)
                assert res.json() == played
                info = (await http.get(f"/api/sessions/{viewer.session_id}", headers=viewer.auth)).json()
                assert (info["source"], info["fps"]) == (source, 30.0)
            await viewer.wait_message("ended", timeout=120)       # the take's input ends: the session says so
            shown = {m["frame"]: m["label"] for m in viewer.messages if m.get("type") == "status"}
        assert await wait_no_sessions(studio, 60)
        return shown
    shown = asyncio.run(scenario())
    schedule = Schedule.from_json(played)
    assert max(shown) == stopped["frames"] - 1 and len(shown) >= stopped["frames"] // 2
    assert shown == {k: schedule.conditioning_at(k).label() for k in shown}   # every switch where it was played


def test_take_mistakes_are_one_line_errors_and_the_stream_goes_on(studio, tmp_path):
    async def scenario():
        async with StudioViewer(studio.url, **VIEW, keep_pixels=False) as viewer:
            await viewer.wait_frames(2)
            mark = await viewer.send({"type": "take", "action": "stop"})
            error = await viewer.wait_message("error", after=mark)
            assert error["message"] == "no take is recording"
            mark = await viewer.send({"type": "take", "action": "pause"})
            assert "action" in (await viewer.wait_message("error", after=mark))["message"]
            studio.app.state.sessions.sessions[viewer.session_id].takes.store = TakeStore(tmp_path / "a-file")
            (tmp_path / "a-file").write_text("not a folder")
            mark = await viewer.send({"type": "take", "action": "start"})
            error = await viewer.wait_message("error", after=mark)
            assert "cannot create the take folder" in error["message"] and "\n" not in error["message"]
            async with httpx.AsyncClient(base_url=studio.url, timeout=60) as http:
                res = await http.post(f"/api/sessions/{viewer.session_id}/take", json={"action": "stop"},
                                      headers=viewer.auth)
                assert res.status_code == 400 and res.json()["error"] == "take: no take is recording"
            n = len(viewer.frames)
            await viewer.wait_frames(n + 8)
        assert await wait_no_sessions(studio)
    asyncio.run(scenario())


def test_render_of_a_folder_that_is_half_a_take_says_what_is_missing(tmp_path, capsys):
    take = tmp_path / "take"
    take.mkdir()
    (take / "take.json").write_text(json.dumps({"width": 64, "height": 32}))
    assert cli(["render", str(take), "-o", str(tmp_path / "o.mp4")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.endswith("not a complete take: schedule.json is missing") and "\n" not in err


def test_a_take_of_an_external_engine_keeps_its_paired_rgb(studio):
    """Every source records: here an external engine's feed carrying a lit RGB image with each G-buffer frame."""
    rng = np.random.default_rng(5)
    sent: dict[bytes, np.ndarray] = {}      # G-buffer bytes → the rgb sent with it
    stop = threading.Event()

    def engine():
        with FeedClient(f"{studio.ws_url}/api/engine/feed", name="paired", width=64, height=32, fps=30,
                        rgb=True) as client:
            for i in range(100_000):
                if stop.is_set():
                    return
                frame = synthetic_gbuffer(64, 32, i / 30, i)
                frame = replace(frame, rgb=rng.integers(0, 256, (32, 64, 3), dtype=np.uint8))
                sent[frame.data.tobytes()] = frame.rgb
                client.send_frame(frame)
                time.sleep(1 / 30)

    feeder = threading.Thread(target=engine, daemon=True)
    feeder.start()

    async def scenario():
        await asyncio.to_thread(wait_until, lambda: "paired" in studio.app.state.feeds.names(), 30, "the feed")
        async with StudioViewer(studio.url, source="feed:paired", size="64x32", prompt="polar",
                                keep_pixels=False) as viewer:
            await viewer.wait_frames(2)
            mark = await viewer.send({"type": "take", "action": "start"})
            await viewer.wait_until(lambda: any(m.get("type") == "status" and m.get("take", {}).get("frames", 0)
                                                >= 8 for m in viewer.messages[mark:]), 60, "8 frames in the take")
            mark = await viewer.send({"type": "take", "action": "stop"})
            return await viewer.wait_message("take", after=mark, state="stopped", timeout=60)
    try:
        stopped = asyncio.run(scenario())
    finally:
        stop.set()
        feeder.join(30)
    take = open_take(studio.settings.takes_path / stopped["take_id"])
    assert take.meta["source"] == "feed:paired" and stopped["reason"] is None
    recording = open_sequence([str(take.input)])
    assert recording.paired and len(recording) == take.meta["frames"] >= 8
    for k in range(len(recording)):
        frame = recording[k]
        assert np.array_equal(frame.rgb, sent[frame.data.tobytes()]), f"take frame {k}: not the rgb sent with it"
