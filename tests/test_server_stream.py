"""The live studio end to end: a real server on 127.0.0.1 and real aiortc viewers (H.264 over loopback).

Sessions stream a small recorded sequence with the frame stamp on, so each decoded picture says which timeline
frame it is.
"""

from __future__ import annotations

import asyncio

import httpx
import numpy as np
import pytest
import torch

from gbuffer.formats import write_npy_windows
from helpers.prom import AS_SCRAPER, SCRAPER, samples
from helpers.sessions import wait_no_sessions
from renderer.reference.synthetic import synthetic_gbuffer
from studio.server import Settings
from studio.server.background import BackgroundServer
from webrtc.client import OfferRefused, StudioViewer
from webrtc.stamp import cell_size

SEQUENCE_FRAMES = 120
SMALL = {"size": "160x96", "fps": 30, "stamp": True, "source": "drive"}


@pytest.fixture(scope="module")
def studio(tmp_path_factory):
    torch.set_num_threads(1)  # sessions render in threads; keep the shared 2-core box responsive
    data = tmp_path_factory.mktemp("data")
    write_npy_windows((synthetic_gbuffer(160, 96, i / 30, i) for i in range(SEQUENCE_FRAMES)), data / "drive")
    with BackgroundServer(Settings(port=0, max_sessions=2, data_dir=data, connect_timeout_s=10,
                                   metrics_token=SCRAPER)) as server:
        yield server


def run(coro):
    return asyncio.run(coro)


def picture_mean(rgb: np.ndarray) -> np.ndarray:
    """Mean colour below the stamp rows."""
    return rgb[3 * cell_size(rgb.shape[1]):].reshape(-1, 3).mean(axis=0)


def test_stream_decodes_stamped_frames_in_order(studio):
    async def scenario():
        async with StudioViewer(studio.url, **SMALL) as viewer:
            hello = await viewer.wait_message("hello")
            assert (hello["width"], hello["height"], hello["codec"]) == (160, 96, "video/H264")
            frames = await viewer.wait_frames(95, timeout=90)
            stamps = [f.stamp for f in frames]
            assert None not in stamps
            steps = np.diff(stamps)
            # in order, one frame at a time; the sequence loops after frame 119
            assert set(steps.tolist()) <= {1, 1 - SEQUENCE_FRAMES}, stamps
            status = viewer.statuses()[-1]
            assert status["label"] == "cyberpunk" and status["target_fps"] == 30
            assert {"frame", "fps", "latency_ms", "stages_ms", "prompts"} <= status.keys()
            assert status["stages_ms"]["total"] > 0
            # per-frame hand-over: each frame leaves as soon as it is rendered, and at most one waits behind the
            # one being sent (a renderer faster than the stream rate keeps the hand-over full, never longer)
            statuses = viewer.statuses()
            assert {s["chunk_size"] for s in statuses} == {1}
            assert max(s["queued"] for s in statuses) <= 1, [s["queued"] for s in statuses]
    run(scenario())


def test_prompt_switch_changes_the_picture_at_the_reported_frame(studio):
    async def scenario():
        async with StudioViewer(studio.url, **SMALL) as viewer:
            await viewer.wait_frames(10)
            mark = await viewer.send({"type": "preset", "name": "volcano"})
            ack = await viewer.wait_message("ack", after=mark)
            switch = ack["frame"]
            n = len(viewer.frames)
            await viewer.wait_until(lambda: any(f.stamp == switch for f in viewer.frames[n:]), 30, "switch frame")
            await viewer.wait_until(lambda: viewer.frames[-1].stamp != switch, 30, "a frame after the switch")
            got = viewer.frames       # the switch frame can be the first after the ack: compare with those before
            at = next(i for i, f in enumerate(got) if i >= n - 4 and f.stamp == switch)
            assert at >= 2, "the switch frame came first; no frame before it to compare"
            means = [picture_mean(f.rgb) for f in got[at - 2:at + 2]]
            before = np.abs(means[1] - means[0]).sum()  # two frames of the old style
            change = np.abs(means[2] - means[1]).sum()   # old → new exactly at the reported frame
            after = np.abs(means[3] - means[2]).sum()
            assert change > 5 * max(before, after, 1.0), (before, change, after)
            status = await viewer.wait_message("status", after=mark, frame=switch)
            assert status["label"] == "volcano"

            # the switch is in the session's schedule: it can be saved and replayed
            async with httpx.AsyncClient(timeout=60) as http:
                schedule = (await http.get(f"{studio.url}/api/sessions/{viewer.session_id}/schedule",
                                           headers=viewer.auth)).json()
            assert schedule["segments"][-1]["start"] == switch
            assert schedule["segments"][-1]["prompts"][0]["preset"] == "volcano"
    run(scenario())


def test_blend_transition_is_gradual(studio):
    async def scenario():
        async with StudioViewer(studio.url, **SMALL, keep_pixels=False) as viewer:
            await viewer.wait_frames(5)
            mark = await viewer.send({"type": "blend", "transition": 8,
                                      "prompts": [{"preset": "polar", "weight": 3}, {"text": "vaporwave"}]})
            ack = await viewer.wait_message("ack", after=mark)
            mid = await viewer.wait_message("status", after=mark, frame=ack["frame"] + 3)
            weights = {p["preset"] or p["text"]: p["weight"] for p in mid["prompts"]}
            assert 0 < weights["cyberpunk"] < 1 and 0 < weights["polar"] < 0.75
    run(scenario())


def test_two_sessions_are_independent_and_a_third_is_refused(studio):
    async def scenario():
        a = await StudioViewer(studio.url, **SMALL, prompt="deep_sea").start()
        b = await StudioViewer(studio.url, **SMALL, prompt="holy_gold").start()
        try:
            with pytest.raises(OfferRefused) as refused:
                await StudioViewer(studio.url, **SMALL).start()
            assert refused.value.status == 503 and "studio full" in refused.value.body["error"]
            await a.wait_frames(10)
            await b.wait_frames(10)
            assert a.session_id != b.session_id
            mark = await a.send({"type": "preset", "name": "infrared"})
            await a.wait_message("ack", after=mark)
            await a.wait_message("status", after=mark, label="infrared")
            await b.wait_frames(len(b.frames) + 10)
            assert {s["label"] for s in b.statuses()} == {"holy_gold"}
            assert abs(picture_mean(a.frames[-1].rgb) - picture_mean(b.frames[-1].rgb)).sum() > 20
        finally:
            await a.close()
            await b.close()
        assert await wait_no_sessions(studio), "closed viewers must free their sessions within seconds"
        async with StudioViewer(studio.url, **SMALL) as c:  # the slot is free again
            await c.wait_frames(3)
    run(scenario())


def test_bad_datachannel_messages_answer_errors_and_the_session_keeps_running(studio):
    async def scenario():
        async with StudioViewer(studio.url, **SMALL, keep_pixels=False) as viewer:
            await viewer.wait_frames(3)
            for message, match in [("{oops", "not JSON"),
                                   ({"type": "warp"}, "unknown message type"),
                                   ({"type": "preset", "name": "no_such_style"}, "unknown preset"),
                                   ({"type": "schedule", "schedule": {"version": 1, "segments": []}}, "segments"),
                                   ({"type": "key", "key": "left", "down": True}, "live source"),
                                   ({"type": "seek", "frame": 100000}, "cannot seek")]:
                mark = await viewer.send(message)
                error = await viewer.wait_message("error", after=mark)
                assert match in error["message"] or match in str(error["where"]), (message, error)
                assert "\n" not in error["message"]
            n = len(viewer.frames)
            await viewer.wait_frames(n + 10)
    run(scenario())


def test_pause_seek_and_play(studio):
    async def scenario():
        async with StudioViewer(studio.url, **SMALL, keep_pixels=False) as viewer:
            await viewer.wait_frames(5)
            mark = await viewer.send({"type": "pause"})
            await viewer.wait_message("ack", after=mark, request="pause")
            await asyncio.sleep(0.5)  # frames already rendered drain
            n = len(viewer.frames)
            await asyncio.sleep(0.5)
            assert len(viewer.frames) == n, "paused sessions send nothing new"
            mark = await viewer.send({"type": "seek", "frame": 100})
            await viewer.wait_message("ack", after=mark, request="seek")
            await viewer.send({"type": "play"})
            await viewer.wait_frames(n + 4)
            stamps = [f.stamp for f in viewer.frames[n:]]
            # the receiver's jitter buffer releases the last pre-pause frame only when the next one arrives
            start = stamps.index(100)
            assert start <= 1 and stamps[start:start + 3] == [100, 101, 102], stamps
    run(scenario())


def test_bad_offers_get_one_line_json_errors(studio):
    async def scenario():
        async with httpx.AsyncClient(base_url=studio.url, timeout=60) as http:
            cases = [({"sdp": "v=0 garbage", "type": "offer"}, 400, "video m-line"),
                     ({"type": "offer"}, 422, "sdp: missing"),
                     ({"sdp": "x", "type": "answer"}, 422, "type"),
                     ({"sdp": "m=video 9\r\n", "type": "offer"}, 400, "SDP offer could not be used"),
                     ({"sdp": "m=video", "size": "big"}, 422, "size: size 'big' is not WIDTHxHEIGHT"),
                     ({"sdp": "m=video", "size": "4000x4000"}, 400, "size"),
                     ({"sdp": "m=video", "fps": 0}, 422, "fps"),
                     ({"sdp": "m=video", "size": "32x16", "stamp": True}, 400, "too small for the frame stamp"),
                     ({"sdp": "m=video", "renderer": "magic"}, 400, "unknown renderer 'magic'"),
                     ({"sdp": "m=video", "source": "../etc/passwd"}, 400, "no sequence"),
                     ({"sdp": "m=video", "source": "feed:nobody"}, 400, "no engine feed named 'nobody'"),
                     ({"sdp": "m=video", "source": "drive", "schedule": {"version": 9, "segments": []}}, 400,
                      "version")]
            for body, status, match in cases:
                res = await http.post("/api/webrtc/offer", json=body)
                assert res.status_code == status, (body, res.text)
                error = res.json()["error"]
                assert match in error and "\n" not in error, (body, error)
            health = (await http.get("/api/health")).json()
            assert health["status"] == "ok" and health["sessions"] == 0
            assert (await http.get("/api/sessions/nope")).status_code == 401   # no key: ids are not probed
            assert (await http.get("/metrics")).status_code == 401           # it names every session
            metrics = samples((await http.get("/metrics", headers=AS_SCRAPER)).text)
            assert metrics["alaya_sessions_active"] == 0 and "alaya_sessions_refused_total" in metrics
            assert "/api/webrtc/offer" in (await http.get("/openapi.json")).json()["paths"]
            assert "<video" in (await http.get("/player")).text
    run(scenario())


@pytest.mark.slow
def test_637_frame_eight_world_rollout_streams_without_a_stall(studio):
    """The report's demo: the built-in engine through the eight styles, 637 frames, every frame delivered."""
    async def scenario():
        async with StudioViewer(studio.url, source="demo", schedule="eight_worlds", size="160x96", fps=60,
                                stamp=True, keep_pixels=False) as viewer:
            await viewer.wait_until(lambda: viewer.frames and (viewer.frames[-1].stamp or 0) >= 636, 300,
                                    "frame 636")
            frames = [f for f in viewer.frames if f.stamp is not None and f.stamp <= 636]
            stamps = [f.stamp for f in frames]
            assert stamps == sorted(set(stamps)) and len(stamps) >= 630, "frames lost or out of order"
            gaps = np.diff([f.received_at for f in frames])
            assert gaps.max() < 2.0, f"a stall of {gaps.max():.1f} s"
            worlds = {s["label"] for s in viewer.statuses() if "+" not in s["label"]}
            assert worlds >= {"cyberpunk", "volcano", "sandstorm", "polar", "vaporwave", "holy_gold", "deep_sea",
                              "infrared"}, worlds
    run(scenario())


def test_driving_the_built_in_engine_takes_it_off_autopilot(studio):
    async def scenario():
        async with StudioViewer(studio.url, source="engine", size="160x96", keep_pixels=False) as viewer:
            await viewer.wait_frames(3)
            engine = studio.sessions[viewer.session_id].rollout.source
            assert engine.autopilot
            mark = await viewer.send({"type": "key", "key": "up", "down": True})
            await viewer.send({"type": "stats"})
            await viewer.wait_message("stats", after=mark)  # commands apply in order, between chunks
            await viewer.wait_until(lambda: not engine.autopilot, 10, "autopilot off")
            assert engine.sim.player_input.throttle == 1.0
            mark = await viewer.send({"type": "autopilot", "on": True})
            await viewer.wait_message("ack", after=mark, request="autopilot")
            assert engine.autopilot
            mark = await viewer.send({"type": "seek", "frame": 3})
            assert "live" in (await viewer.wait_message("error", after=mark))["message"]
    run(scenario())


def test_an_offer_that_never_connects_is_dropped(tmp_path):
    async def scenario(server):
        from aiortc import RTCPeerConnection

        pc = RTCPeerConnection()
        pc.addTransceiver("video", direction="recvonly")
        await pc.setLocalDescription(await pc.createOffer())
        async with httpx.AsyncClient(timeout=60) as http:
            res = await http.post(f"{server.url}/api/webrtc/offer",
                                  json={"sdp": pc.localDescription.sdp, "type": "offer", "size": "64x32"})
        assert res.status_code == 200 and len(server.sessions) == 1
        await pc.close()  # the answer is never applied: ICE never starts
        assert await wait_no_sessions(server, timeout=8)
    with BackgroundServer(Settings(port=0, max_sessions=1, connect_timeout_s=1.5)) as server:
        run(scenario(server))


def test_vp8_only_peers_get_vp8_with_the_session_bitrate(studio):
    async def scenario():
        async with StudioViewer(studio.url, **SMALL, bitrate=1_500_000, keep_pixels=False,
                                codecs=("video/VP8",)) as viewer:  # like a browser without H.264
            frames = await viewer.wait_frames(10)
            assert all(f.stamp is not None for f in frames)
            session = studio.sessions[viewer.session_id]
            assert session.codec == "video/VP8"
            encoder = session.encoder.inner  # shared with the session's watchers (webrtc.fanout)
            assert type(encoder).__name__ == "SessionVp8Encoder"
            assert encoder.settings.bitrate == 1_500_000
            assert encoder.codec.gop_size == 60  # a keyframe every 2 s, not aiortc's 3000 frames
    run(scenario())


def test_the_stamp_turns_on_and_off_mid_session_and_refuses_a_picture_too_small(studio):
    async def scenario():
        async with StudioViewer(studio.url, size="160x96", source="drive") as viewer:
            await viewer.wait_frames(3)
            assert all(f.stamp is None for f in viewer.frames)
            mark = await viewer.send({"type": "stamp", "on": True})
            await viewer.wait_message("ack", after=mark, request="stamp")
            n = len(viewer.frames)
            await viewer.wait_until(lambda: sum(f.stamp is not None for f in viewer.frames[n:]) >= 5, 60,
                                    "stamped frames")
            stamps = [f.stamp for f in viewer.frames[n:] if f.stamp is not None]
            assert stamps == sorted(stamps) and len(set(stamps)) == len(stamps)     # each frame's own number
        async with StudioViewer(studio.url, size="32x16", source="drive", keep_pixels=False) as tiny:
            await tiny.wait_frames(2)
            mark = await tiny.send({"type": "stamp", "on": True})
            error = await tiny.wait_message("error", after=mark)
            assert error["message"] == "32x16 is too small for the frame stamp" and error["where"] == "stamp"
        assert await wait_no_sessions(studio)
    run(scenario())
