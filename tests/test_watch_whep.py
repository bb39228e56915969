"""Watching a session without steering it, end to end with real aiortc peers: WHEP playback (POST /whep/{id} →
201 + Location, DELETE → 200), the watch page's WHEP-plus-status flavour, one encode shared by every watcher,
refused control messages, the per-session watcher limit, and "ended" when the owner ends."""

from __future__ import annotations

import asyncio
import time

import httpx
import pytest
import torch

from gbuffer.formats import write_npy_windows
from renderer.reference.synthetic import synthetic_gbuffer
from studio.server import Settings
from studio.server.audience import ENDED
from studio.server.background import BackgroundServer
from webrtc.client import OfferRefused, StudioViewer, WhepViewer

OWNER = {"size": "96x64", "fps": 20, "stamp": True, "source": "seq"}


@pytest.fixture(scope="module")
def studio(tmp_path_factory):
    torch.set_num_threads(1)
    data = tmp_path_factory.mktemp("data")
    write_npy_windows((synthetic_gbuffer(96, 64, i / 30, i) for i in range(60)), data / "seq")
    with BackgroundServer(Settings(port=0, max_sessions=3, max_watchers=2, data_dir=data,
                                   connect_timeout_s=15)) as server:
        yield server


def run(coro):
    return asyncio.run(coro)


async def owner_and_key(studio) -> tuple[StudioViewer, str]:
    owner = await StudioViewer(studio.url, **OWNER).start()
    hello = await owner.wait_message("hello")
    return owner, hello["watch"]["key"]


def test_whep_plays_the_session_and_delete_ends_only_that_playback(studio):
    async def scenario():
        owner, key = await owner_and_key(studio)
        try:
            player = await WhepViewer(studio.url, owner.session_id, key, keep_pixels=False).start()
            assert player.location.startswith(f"/whep/{owner.session_id}/")
            frames = await player.wait_frames(20)
            stamps = [f.stamp for f in frames]
            assert None not in stamps, stamps
            assert all(0 < (b - a) % 60 < 30 for a, b in zip(stamps, stamps[1:])), stamps  # in order (it loops)
            res = await player.stop()
            assert res.status_code == 200
            async with httpx.AsyncClient() as http:  # the same DELETE again: that playback is gone
                again = await http.delete(studio.url + player.location, headers=player.headers())
            assert again.status_code == 404 and again.json()["error"]
            seen = len(owner.frames)
            await owner.wait_frames(seen + 20)  # the owner never noticed
            assert studio.sessions[owner.session_id].audience.watchers == {}
        finally:
            await owner.close()
    run(scenario())


def test_watchers_share_the_owners_encode(studio):
    async def scenario():
        owner, key = await owner_and_key(studio)
        watchers = [WhepViewer(studio.url, owner.session_id, key, status=True, keep_pixels=False) for _ in range(2)]
        try:
            for w in watchers:
                await w.start()
            for w in watchers:
                await w.wait_frames(30)
                assert (await w.wait_message("hello"))["role"] == "watcher"
                assert "watch" not in w.messages[0] and "key" not in str(w.messages[0])
                status = await w.wait_message("status")
                assert status["label"] == "cyberpunk" and status["frame"] >= 0
            session = studio.sessions[owner.session_id]
            encoders = session.audience.fanout.encoders
            assert list(encoders.by_codec) == ["video/h264"]
            # one encode per frame the owner's track sent, not one per peer
            assert 0 < encoders.frames_encoded <= session.track.frames_sent
        finally:
            for w in watchers:
                await w.close()
            await owner.close()
    run(scenario())


def test_watchers_cannot_steer_but_may_ask_for_stats_and_the_clock(studio):
    async def scenario():
        owner, key = await owner_and_key(studio)
        try:
            async with WhepViewer(studio.url, owner.session_id, key, status=True, keep_pixels=False) as watcher:
                await watcher.wait_message("hello")
                for message in ({"type": "preset", "name": "volcano"}, {"type": "pause"},
                                {"type": "seek", "frame": 3}, {"type": "schedule", "text": "0: polar"},
                                {"type": "stamp", "on": True},
                                # on the beat (issue 44): a watcher can neither set the tempo nor quantize or time a
                                # switch into the session it watches
                                {"type": "tempo", "bpm": 120}, {"type": "beat"},
                                {"type": "screen_delay", "ms": 900},      # nor move the owner's beats
                                {"type": "preset", "name": "polar", "quantize": "beat"},
                                {"type": "preset", "name": "polar", "at": time.time() + 1}):
                    mark = await watcher.send(message)
                    error = await watcher.wait_message("error", after=mark, request=message["type"])
                    assert "watchers cannot control" in error["message"]
                mark = await watcher.send("not json")
                assert "not JSON" in (await watcher.wait_message("error", after=mark))["message"]
                mark = await watcher.send({"type": "stats"})
                assert (await watcher.wait_message("stats", after=mark))["session_id"] == owner.session_id
                sent = time.time() * 1e3
                mark = await watcher.send({"type": "ping", "t": sent})
                pong = await watcher.wait_message("pong", after=mark)
                assert pong["t"] == sent and sent <= pong["server_ms"] <= time.time() * 1e3   # one machine, one clock
                await watcher.wait_frames(len(watcher.frames) + 5)
            session = studio.sessions[owner.session_id]
            segments = session.rollout.schedule.to_json()["segments"]
            assert session.state == "playing" and len(segments) == 1
            assert segments[0]["prompts"] == [{"preset": "cyberpunk", "weight": 1.0}]
            assert not [m for m in owner.messages if m["type"] == "ack"]
        finally:
            await owner.close()
    run(scenario())


def test_the_watcher_limit_is_per_session_and_frees_when_one_leaves(studio):
    async def scenario():
        owner, key = await owner_and_key(studio)
        try:
            first = await WhepViewer(studio.url, owner.session_id, key, keep_pixels=False).start()
            second = await WhepViewer(studio.url, owner.session_id, key, keep_pixels=False).start()
            with pytest.raises(OfferRefused) as refused:
                await WhepViewer(studio.url, owner.session_id, key).start()
            assert refused.value.status == 503 and "already has 2 watcher(s)" in refused.value.body["error"]
            assert (await first.stop()).status_code == 200
            third = await WhepViewer(studio.url, owner.session_id, key, keep_pixels=False).start()
            await third.wait_frames(5)
            await second.wait_frames(len(second.frames) + 5)
            for w in (second, third):
                await w.close()
        finally:
            await owner.close()
    run(scenario())


def test_watchers_see_ended_when_the_owner_ends(studio):
    async def scenario():
        owner, key = await owner_and_key(studio)
        page_like = await WhepViewer(studio.url, owner.session_id, key, status=True, keep_pixels=False).start()
        player = await WhepViewer(studio.url, owner.session_id, key, keep_pixels=False).start()
        try:
            await page_like.wait_message("hello")  # its status channel is open, as on a watch page showing video
            await page_like.wait_frames(5)
            await player.wait_frames(5)
            async with httpx.AsyncClient() as http:
                assert (await http.delete(f"{studio.url}/api/sessions/{owner.session_id}",
                                         headers=owner.auth)).status_code == 204
            ended = await page_like.wait_message("ended")
            assert ended["reason"] == ENDED
            await player.wait_until(lambda: player.pc.connectionState == "closed"
                                    or player._reader is not None and player._reader.done(), 30,
                                    "the WHEP player's stream to end")
            # nothing after "ended": a frame the track was pacing as the session closed is not published
            after = page_like.messages[page_like.messages.index(ended) + 1:]
            assert not [m for m in after if m.get("type") == "status"], after
            async with httpx.AsyncClient() as http:  # the key died with the session
                res = await http.post(f"{studio.url}/whep/{owner.session_id}", content="v=0",
                                      headers={"Content-Type": "application/sdp", "Authorization": f"Bearer {key}"})
            assert res.status_code == 401           # as for any session that is not there: nothing to probe
        finally:
            for peer in (page_like, player, owner):
                await peer.close()
    run(scenario())
