"""Issue 42, the offer door: what a stranger's offer costs the studio. A victim streams beside each attack
(helpers.bystander) and must keep streaming, with /api/health and the studio's loop never held 0.5 s."""

from __future__ import annotations

import httpx
from helpers.bystander import Bystander

from studio.server.background import BackgroundServer
from studio.server.settings import Settings

# finding 1: 434 bytes that asked the Parseq path to expand 8 prompts over 1,080,000 frames on the event loop
FREEZE = {"sdp": "x", "schedule": {"prompts": [{"positive": f"world {i}", "allFrames": True} for i in range(8)],
                                   "keyframes": [{"frame": 1079999}]}}


def test_a_huge_parseq_schedule_gets_one_line_and_freezes_nobody():
    with BackgroundServer(Settings(port=0, max_sessions=4)) as server, Bystander(server) as victim:
        with httpx.Client(base_url=server.url, timeout=60) as http:
            answer = http.post("/api/webrtc/offer", json=FREEZE)
            assert answer.status_code == 400
            detail = answer.json()["error"]
            assert "\n" not in detail and "video" in detail            # the SDP is judged before the schedule
            answer = http.post("/api/webrtc/offer", json={**FREEZE, "sdp": "v=0\r\nm=video 9 UDP/TLS/RTP/SAVPF 96\r\n"})
            assert answer.status_code == 400
            detail = answer.json()["error"]
            assert "\n" not in detail and "frames" in detail, detail
        victim.assert_unharmed()

