"""Security: sequence names cannot leave the data directory, offers never read files they name, and engine feeds
need the configured token. (Uploads belong to the UI and are tested there.)"""

from __future__ import annotations

import json
import os

import httpx
import pytest
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

from gbuffer.feed.protocol import Hello
from gbuffer.formats import write_npy_windows
from renderer.reference.synthetic import synthetic_gbuffer
from studio.server import Settings
from studio.server.background import BackgroundServer

TOKEN = "correct-horse-battery"


@pytest.fixture(scope="module")
def studio(tmp_path_factory):
    """A studio whose data dir holds `tiny`; a valid sequence `secret` sits beside the data dir, outside it,
    so any traversal that worked would open it and answer 200."""
    root = tmp_path_factory.mktemp("root")
    data = root / "data"
    frames = [synthetic_gbuffer(32, 16, i / 30, i) for i in range(4)]
    write_npy_windows(frames, data / "tiny")
    write_npy_windows(frames, root / "secret")
    os.symlink(root / "secret", data / "escape")  # a link inside the data dir that points out of it
    (root / "show.txt").write_text('"0": "cyberpunk", "10": "volcano"')
    with BackgroundServer(Settings(port=0, max_sessions=2, data_dir=data, token=TOKEN,
                                   connect_timeout_s=1)) as server:
        server.root = root
        yield server


def offer(studio, **fields) -> httpx.Response:
    # Only the source is under test: an SDP with no usable video makes an accepted source fail later, at
    # negotiation, with "SDP offer could not be used" rather than "no sequence".
    return httpx.post(f"{studio.url}/api/webrtc/offer", json={"sdp": "v=0\r\nm=video 9\r\n", "type": "offer",
                                                                "size": "32x16", **fields}, timeout=30)


def test_a_sequence_inside_the_data_dir_is_accepted(studio):
    res = offer(studio, source="tiny")
    assert res.status_code == 400 and "SDP offer could not be used" in res.json()["error"]


@pytest.mark.parametrize("source", [
    "../secret", "tiny/../../secret", "../../../../etc/passwd", "/etc/passwd", "escape", "escape/window-00.npy",
    "tiny/../../secret/window-00.npy", "~/secret", "tiny\x00", "..", ".", "", "%2e%2e/secret",
])
def test_sequence_names_cannot_leave_the_data_dir(studio, source):
    res = offer(studio, source=source)
    assert res.status_code == 400, res.text
    assert res.json()["where"] == "source" and "no sequence" in res.json()["error"], res.text


@pytest.mark.parametrize("field, value", [("schedule", "{root}/show.txt"), ("schedule", "../../../etc/passwd"),
                                          ("prompt", "{root}/show.txt")])
def test_offers_never_read_the_files_they_name(studio, field, value):
    """A schedule is a JSON object, a built-in name or keyframe text; a path is none of those."""
    res = offer(studio, source="tiny", **{field: value.format(root=studio.root)})
    error = res.json()["error"]
    assert res.status_code == 400 and "volcano" not in error
    if field == "schedule":
        assert res.json()["where"].startswith("schedule")


def test_built_in_schedule_names_cannot_traverse(studio):
    res = offer(studio, source="tiny", schedule="../schedules/eight_worlds")
    assert res.status_code == 400 and res.json()["where"].startswith("schedule")


def test_session_ids_in_urls_are_only_looked_up(studio):
    for path in ("/api/sessions/..%2F..%2Fetc%2Fpasswd", "/api/sessions/%00", "/api/sessions/../health/x"):
        res = httpx.get(f"{studio.url}{path}", timeout=60)
        assert res.status_code == 404 and "root:" not in res.text


# ---- engine feed tokens -----------------------------------------------------------------------------------

def feed_reply(studio, headers=None, query="") -> tuple[int | None, str]:
    """(close code, reason) if the studio closed the feed, (None, 'welcome') if it was welcomed."""
    with connect(f"{studio.ws_url}/api/engine/feed{query}", additional_headers=headers or {}) as ws:
        try:
            ws.send(Hello("probe", 32, 16, 30.0).to_json())
            reply = json.loads(ws.recv(timeout=10))
        except ConnectionClosed as closed:
            return closed.rcvd.code, closed.rcvd.reason
    return None, reply["type"]


@pytest.mark.parametrize("headers, query", [
    (None, ""),
    ({"Authorization": "Bearer wrong"}, ""),
    ({"Authorization": f"Bearer {TOKEN[:-1]}"}, ""),
    ({"Authorization": f"Bearer {TOKEN}x"}, ""),
    ({"Authorization": TOKEN}, ""),
    ({"Authorization": "Bearer "}, ""),
    ({"Authorization": "Bearer ünïcode"}, ""),
    (None, "?token=wrong"),
    (None, "?token="),
])
def test_feeds_without_the_right_token_are_refused(studio, headers, query):
    code, reason = feed_reply(studio, headers, query)
    assert code == 4401 and "token" in reason
    assert "probe" not in studio.app.state.feeds.names()


@pytest.mark.parametrize("headers, query", [({"Authorization": f"Bearer {TOKEN}"}, ""),
                                            ({"Authorization": f"bearer {TOKEN}"}, ""),
                                            (None, f"?token={TOKEN}")])
def test_the_right_token_is_welcomed(studio, headers, query):
    assert feed_reply(studio, headers, query) == (None, "welcome")


def test_feed_names_cannot_carry_paths(studio):
    headers = {"Authorization": f"Bearer {TOKEN}"}
    for name in ("../x", "a/b", "..", "x" * 65, "a\x00b"):
        with connect(f"{studio.ws_url}/api/engine/feed", additional_headers=headers) as ws:
            ws.send(json.dumps({"type": "hello", "protocol": 1, "name": name, "width": 32, "height": 16, "fps": 30}))
            with pytest.raises(ConnectionClosed) as closed:
                ws.recv(timeout=10)
        assert closed.value.rcvd.code == 4400 and "hello.name" in closed.value.rcvd.reason
