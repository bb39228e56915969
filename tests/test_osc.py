"""OSC show control with real UDP packets from python-osc's client into a running studio with a live session."""

from __future__ import annotations

import asyncio
import random
import socket

import httpx
import pytest
import torch
from pythonosc.osc_bundle_builder import IMMEDIATELY, OscBundleBuilder
from pythonosc.osc_message_builder import OscMessageBuilder
from pythonosc.udp_client import SimpleUDPClient

from helpers.browser import ADMIN, AS_ADMIN
from helpers.prom import samples
from helpers.sessions import wait_no_sessions
from studio.server import Settings
from studio.server.background import BackgroundServer
from webrtc.client import StudioViewer

VIEW = {"size": "64x32", "source": "demo"}


def free_udp_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def studio(tmp_path_factory):
    torch.set_num_threads(1)
    with BackgroundServer(Settings(port=0, max_sessions=2, osc_port=free_udp_port(), admin_token=ADMIN,
                                   takes_dir=tmp_path_factory.mktemp("takes"))) as server:
        yield server


def osc_counts(studio) -> tuple[float, float]:
    m = samples(studio.app.state.metrics.exposition().decode())
    rejected = sum(v for k, v in m.items() if k.startswith("alaya_osc_rejected_total"))
    return m.get("alaya_osc_applied_total", 0.0), rejected


def schedule_of(studio, session_id: str) -> dict:
    owner = {"Authorization": f"Bearer {studio.sessions[session_id].owner_key}"}
    return httpx.get(f"{studio.url}/api/sessions/{session_id}/schedule", headers=owner, timeout=60).json()


def presets_in(schedule: dict) -> list[str]:
    return [p.get("preset") or p.get("text") for seg in schedule["segments"]
            for p in (seg.get("prompts") or [seg.get("prompt")]) if p]


def test_a_style_switch_over_osc_lands_in_the_session_at_the_next_chunk(studio):
    client = SimpleUDPClient("127.0.0.1", studio.settings.osc_port)

    async def scenario():
        async with StudioViewer(studio.url, **VIEW, keep_pixels=False) as first, \
                StudioViewer(studio.url, **VIEW, keep_pixels=False, key=ADMIN) as presenter:
            await presenter.wait_frames(4)
            # no session named: the admin's newest (the presenter's) takes it
            mark = len(presenter.messages)
            client.send_message("/alaya/preset", "volcano")
            ack = await presenter.wait_message("ack", after=mark, request="preset")
            status = await presenter.wait_until(
                lambda: next((m for m in presenter.messages[mark:] if m.get("type") == "status"
                              and m["frame"] >= ack["frame"] and m["label"] == "volcano"), None),
                30, "a frame rendered in volcano")
            assert status["frame"] >= ack["frame"]
            assert "volcano" in str(schedule_of(studio, presenter.session_id))
            assert "volcano" not in str(schedule_of(studio, first.session_id))
            # a visitor's session is not OSC's to steer, by id or not (issue 42: any local program sends OSC)
            _, rejected = osc_counts(studio)
            client.send_message(f"/alaya/session/{first.session_id}/preset", "polar")
            await first.wait_until(lambda: osc_counts(studio)[1] > rejected, 30, "the visitor's id refused")
            assert "polar" not in str(schedule_of(studio, first.session_id))
            # the presenter's session by id, with a transition set first
            client.send_message(f"/alaya/session/{presenter.session_id}/transition", 8)
            client.send_message(f"/alaya/session/{presenter.session_id}/blend", ["polar", "infrared", 0.25])
            ack = await presenter.wait_message("ack", after=mark, request="blend")
            assert ack["transition"] == 8 and "polar" in ack["label"] and "infrared" in ack["label"]
            client.send_message("/alaya/take/start", [])
            await presenter.wait_message("ack", after=mark, request="take", action="start")
            client.send_message("/alaya/take/stop", [])
            stopped = await presenter.wait_message("take", after=mark, state="stopped", timeout=60)
            assert (studio.settings.takes_dir / stopped["take_id"] / "take.json").is_file()
            client.send_message("/alaya/pause", [])
            await presenter.wait_message("ack", after=mark, request="pause")
        assert await wait_no_sessions(studio)

    asyncio.run(scenario())


def junk(rng: random.Random, session_id: str) -> bytes:
    """One malformed packet: bytes, an unknown or mistyped address, wrong argument types, a refused command."""
    kind = rng.randrange(7)
    if kind == 0:
        return rng.randbytes(rng.randrange(0, 64))
    builder = OscMessageBuilder(rng.choice(["/alaya/preset", "/alaya/prompt", "/alaya/blend", "/alaya/seek",
                                            "/alaya/transition", "/alaya/nothing", "/other/app",
                                            f"/alaya/session/{session_id}/preset", "/alaya/session/nobody/play",
                                            "/alaya/session/x", "/alaya//preset"]))
    if kind == 1:            # arguments of the wrong type or count
        for value in rng.sample([1, 2.5, "x", b"\x00\x01", True], rng.randrange(0, 4)):
            builder.add_arg(value)
    elif kind == 2:          # an unknown preset, or a seek on a live source: the session refuses
        builder = OscMessageBuilder(rng.choice(["/alaya/preset", "/alaya/seek"]))
        builder.add_arg("lava-land-9" if rng.random() < 0.5 else 5)
    elif kind == 3:          # out of range
        builder = OscMessageBuilder(rng.choice(["/alaya/transition", "/alaya/blend"]))
        for value in ([10**6] if rng.random() < 0.5 else ["polar", "volcano", 7.0]):
            builder.add_arg(value)
    message = builder.build().dgram
    if kind == 4:            # truncated
        return message[:rng.randrange(len(message))]
    if kind == 5:            # a bundle of junk, timed far in the future (must not make the server wait)
        bundle = OscBundleBuilder(IMMEDIATELY)
        bundle.add_content(OscMessageBuilder("/alaya/bogus").build())
        data = bytearray(bundle.build().dgram)
        data[8:16] = (2**63).to_bytes(8, "big")
        return bytes(data)
    return message


def test_a_thousand_malformed_packets_are_counted_and_the_session_streams_on(studio):
    rng = random.Random(7)
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)

    async def scenario():
        async with StudioViewer(studio.url, **VIEW, keep_pixels=False, key=ADMIN) as viewer:
            await viewer.wait_frames(4)
            applied0, rejected0 = osc_counts(studio)
            sent = 0
            for _batch in range(20):   # in batches the server has read, so loopback UDP drops nothing
                for _ in range(50):
                    sock.sendto(junk(rng, viewer.session_id), ("127.0.0.1", studio.settings.osc_port))
                    sent += 1
                await viewer.wait_until(lambda sent=sent: sum(osc_counts(studio)) - applied0 - rejected0 >= sent, 30,
                                        f"the studio to read {sent} packets")
            applied, rejected = osc_counts(studio)
            assert rejected - rejected0 >= 900 and (applied - applied0) + (rejected - rejected0) == sent
            assert not any(m.get("type") == "error" and m.get("where") == "session" for m in viewer.messages)
            n = len(viewer.frames)
            await viewer.wait_frames(n + 10)      # still streaming
            SimpleUDPClient("127.0.0.1", studio.settings.osc_port).send_message("/alaya/preset", "polar")
            await viewer.wait_until(lambda: "polar" in str(schedule_of(studio, viewer.session_id)), 30,
                                    "a valid command after the junk")
        assert await wait_no_sessions(studio)

    try:
        asyncio.run(scenario())
    finally:
        sock.close()
    reasons = samples(studio.app.state.metrics.exposition().decode())
    for reason in ("not OSC", "unknown address", "bad arguments", "refused", "not the presenter's session"):
        assert reasons.get(f'alaya_osc_rejected_total{{reason="{reason}"}}', 0) > 0, reason


def test_osc_beyond_loopback_starts_only_when_the_operator_confirms():
    """OSC carries no credentials (issue 26): on a network address anyone there would steer every session."""
    from alaya_errors import UserError
    from studio.server.osc import refuse_remote

    with pytest.raises(UserError, match="--osc-allow-remote"):
        refuse_remote(Settings(osc_host="0.0.0.0", osc_port=9000))
    refuse_remote(Settings(osc_host="0.0.0.0", osc_port=9000, osc_allow_remote=True))
    refuse_remote(Settings(osc_host="::1", osc_port=9000))


def test_the_admin_points_osc_at_a_session_while_the_studio_runs(studio):
    """OSC steers one session; the admin may name it at run time (PUT /api/osc), a visitor may not."""
    client = SimpleUDPClient("127.0.0.1", studio.settings.osc_port)

    async def scenario():
        async with StudioViewer(studio.url, **VIEW, keep_pixels=False) as visitor:
            await visitor.wait_frames(2)
            async with httpx.AsyncClient(base_url=studio.url, timeout=30) as http:
                body = {"session_id": visitor.session_id}
                assert (await http.put("/api/osc", json=body)).status_code == 401
                assert (await http.put("/api/osc", json=body, headers=visitor.auth)).status_code == 401
                assert (await http.put("/api/osc", json={"session_id": "nobody"}, headers=AS_ADMIN)).status_code == 404
                assert (await http.put("/api/osc", json=body, headers=AS_ADMIN)).json() == body
                mark = len(visitor.messages)
                client.send_message("/alaya/preset", "infrared")
                await visitor.wait_message("ack", after=mark, request="preset")
                assert (await http.put("/api/osc", json={"session_id": None}, headers=AS_ADMIN)).status_code == 200
        assert await wait_no_sessions(studio)

    asyncio.run(scenario())
