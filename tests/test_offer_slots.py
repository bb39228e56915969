"""Slots cost something (issue 42, findings 9 and 10): an offer that never connects held a slot for 20 s and
nothing limited one client, so re-offering kept the studio full; and every offer, even a failing one, registered
a visitor, so 10,000 of them pushed out visitors holding nothing. Now one address has at most
`max_pending_per_client` offers still connecting, the connect deadline is 10 s, and a visitor is registered only
once its session has started. Real sockets and real aiortc offers, a visitor streaming beside them."""

from __future__ import annotations

import httpx
import pytest

from helpers.bystander import Bystander
from helpers.loop import LoopThread
from helpers.waiting import wait_until
from helpers.watch import recvonly_offer_sdp
from studio.server import Settings
from studio.server.background import BackgroundServer


def test_an_address_with_offers_still_connecting_gets_a_429_until_they_connect_or_expire():
    settings = Settings(port=0, max_sessions=4, max_pending_per_client=1, pending_limit_on_loopback=True,
                        connect_timeout_s=3)
    loop = LoopThread()
    try:
        with BackgroundServer(settings) as server:
            def offer():
                return httpx.post(f"{server.url}/api/webrtc/offer", timeout=60, json={
                    "sdp": loop.run(recvonly_offer_sdp()), "size": "64x32"})   # its peer is gone: it never connects
            assert offer().status_code == 200
            squat = offer()
            assert squat.status_code == 429 and "still connecting" in squat.json()["error"], squat.text
            assert "\n" not in squat.json()["error"] and squat.headers["retry-after"] == "10"
            # the squatted slot frees at the connect deadline, and the address may offer again
            wait_until(lambda: not server.sessions, 60, "the unconnected offer to be dropped")
            assert offer().status_code == 200
    finally:
        loop.close()


def test_failing_offers_register_no_visitor_while_a_visitor_streams_on():
    with BackgroundServer(Settings(port=0, max_sessions=2)) as server, Bystander(server) as victim:
        visitors = server.app.state.visitors
        known = len(visitors.known)
        for n in range(200):
            res = httpx.post(f"{server.url}/api/webrtc/offer", timeout=60,
                             json={"sdp": "v=0\r\nm=video 9 UDP/TLS/RTP/SAVPF 96\r\n", "source": f"nothing-{n}"})
            assert res.status_code == 400, res.text
        assert len(visitors.known) == known
        victim.assert_unharmed()


def test_a_megabyte_of_prompt_text_is_one_line():
    with BackgroundServer(Settings(port=0, max_sessions=1)) as server:
        schedule = {"version": 1, "segments": [{"start": 0, "prompts": [{"text": "lava " * 20_000}]}]}
        res = httpx.post(f"{server.url}/api/webrtc/offer", timeout=60,
                         json={"sdp": "v=0\r\nm=video 9 UDP/TLS/RTP/SAVPF 96\r\n", "schedule": schedule})
        assert res.status_code == 400 and "2000 characters" in res.json()["error"], res.text[:200]
        assert "\n" not in res.json()["error"]


@pytest.mark.parametrize("field", ["keyframes", "prompt"])
def test_overlong_prompts_in_every_spelling_are_one_line(field):
    with BackgroundServer(Settings(port=0, max_sessions=1)) as server:
        text = "lava " * 1000
        body = {"sdp": "v=0\r\nm=video 9 UDP/TLS/RTP/SAVPF 96\r\n"}
        body.update({"schedule": {"prompts": [{"positive": text, "allFrames": True}], "keyframes": [{"frame": 9}]}}
                    if field == "keyframes" else {"prompt": text})
        res = httpx.post(f"{server.url}/api/webrtc/offer", timeout=60, json=body)
        assert res.status_code in (400, 422) and "2000 characters" in res.json()["error"], res.text[:300]
        assert "\n" not in res.json()["error"]
