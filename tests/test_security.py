"""Security: sequence names cannot leave the data directory, offers never read files they name, and engine feeds
need the configured token; watch links and WHEP need the session's watch key (or the token), DELETE only once,
and a session's audience is capped. (Uploads belong to the UI and are tested there.)"""

from __future__ import annotations

import json
import os

import httpx
import pytest
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

from gbuffer.feed.protocol import Hello
from gbuffer.formats import write_npy_windows
from helpers.loop import LoopThread
from helpers.watch import recvonly_offer_sdp, start_owner
from renderer.reference.synthetic import synthetic_gbuffer
from studio.server import Settings
from studio.server.background import BackgroundServer

TOKEN = "correct-horse-battery"
ADMIN = "staple-admin-token-of-the-studio"


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
    with BackgroundServer(Settings(port=0, max_sessions=2, data_dir=data, token=TOKEN, admin_token=ADMIN,
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
    """Without a key: refused (401 before any lookup, or 404 where no route matches); the admin, who may look,
    finds no such session."""
    for path in ("/api/sessions/..%2F..%2Fetc%2Fpasswd", "/api/sessions/%00", "/api/sessions/../health/x"):
        res = httpx.get(f"{studio.url}{path}", timeout=60)
        assert res.status_code in (401, 404) and "root:" not in res.text
        res = httpx.get(f"{studio.url}{path}", headers={"Authorization": f"Bearer {ADMIN}"}, timeout=60)
        assert res.status_code == 404 and "root:" not in res.text
    assert httpx.get(f"{studio.url}/api/sessions/%00", timeout=60).status_code == 401


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


# ---- watch keys and WHEP -----------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def watched(tmp_path_factory):
    """A studio (server token TOKEN, one watcher per session) with a live owner session; yields
    (studio, session, loop) where `loop` runs aiortc peers."""
    data = tmp_path_factory.mktemp("watched")
    write_npy_windows([synthetic_gbuffer(64, 32, i / 30, i) for i in range(30)], data / "seq")
    loop = LoopThread()
    # watchers here are answered but never connect: they must stay until the test DELETEs them
    with BackgroundServer(Settings(port=0, max_sessions=2, max_watchers=1, data_dir=data, token=TOKEN,
                                   admin_token=ADMIN, connect_timeout_s=120)) as server:
        owner = loop.run(start_owner(server.url, source="seq", size="64x32"))
        yield server, server.sessions[owner.session_id], loop
        loop.run(owner.close())
    loop.close()


def whep_offer_sdp(loop) -> str:
    return loop.run(recvonly_offer_sdp())


def whep_post(studio, session_id: str, auth: str | None, sdp: str = "v=0\r\n") -> httpx.Response:
    headers = {"Content-Type": "application/sdp", **({"Authorization": auth.encode()} if auth is not None else {})}
    return httpx.post(f"{studio.url}/whep/{session_id}", content=sdp, headers=headers, timeout=30)


def test_watch_keys_are_long_random_and_per_session(watched):
    studio, session, _ = watched
    key = session.audience.key
    assert len(key) >= 32 and key not in (session.id, TOKEN)
    from studio.server.audience import Audience
    assert len({Audience(session).key for _ in range(100)}) == 100


@pytest.mark.parametrize("auth", [None, "Bearer", "Bearer wrong", "Basic {key}", "{key}",
                                  "Bearer {key}x", "Bearer {short}", "Bearer ünïcode", "Bearer {key} {key}"])
def test_whep_without_the_right_key_is_401(watched, auth):
    studio, session, _ = watched
    key = session.audience.key
    if auth is not None:
        auth = auth.format(key=key, short=key[:-1])
    res = whep_post(studio, session.id, auth)
    assert res.status_code == 401 and "watch key" in res.json()["error"], res.text
    assert res.headers["www-authenticate"].startswith("Bearer")
    assert key not in res.text


def test_watch_links_without_the_right_key_are_401(watched):
    studio, session, _ = watched
    for query in ("", "?key=", "?key=wrong", f"?key={session.audience.key[:-1]}", f"?key={session.id}"):
        res = httpx.get(f"{studio.url}/studio/watch/{session.id}{query}")
        assert res.status_code == 401 and session.audience.key not in res.text
    assert httpx.get(f"{studio.url}/studio/watch/{session.id}?key={session.audience.key}").status_code == 200


def test_unknown_sessions_and_bad_bodies_are_4xx_before_any_peer_is_made(watched):
    studio, session, loop = watched
    bearer = f"Bearer {session.audience.key}"
    # another session's key opens no other id (the same 401 whether it exists or not); the admin sees 404
    assert whep_post(studio, "nope", bearer).status_code == 401
    assert whep_post(studio, "nope", f"Bearer {ADMIN}").status_code == 404
    assert whep_post(studio, "..%2F..%2Fapi%2Fhealth", f"Bearer {ADMIN}").status_code == 404
    wrong_type = httpx.post(f"{studio.url}/whep/{session.id}", json={"sdp": "x"}, headers={"Authorization": bearer})
    assert wrong_type.status_code == 415
    assert whep_post(studio, session.id, bearer, "x" * 200_000).status_code == 413
    not_utf8 = httpx.post(f"{studio.url}/whep/{session.id}", content=b"\xff\xfe", timeout=30,
                          headers={"Content-Type": "application/sdp", "Authorization": bearer})
    assert not_utf8.status_code == 400
    bad_sdp = whep_post(studio, session.id, bearer, "v=0\r\nm=video 9\r\n")
    assert bad_sdp.status_code == 400 and bad_sdp.json()["where"] == "sdp"
    assert whep_post(studio, session.id, bearer, "v=0\r\n").json()["where"] == "sdp"  # no video m-line
    assert session.audience.watchers == {} and session.audience.pending == 0


def test_delete_needs_the_key_and_a_replayed_delete_is_404(watched):
    studio, session, loop = watched
    # the engines' feed token opens no session (issue 42: with ids from /metrics it opened every one)
    assert whep_post(studio, session.id, f"Bearer {TOKEN}", whep_offer_sdp(loop)).status_code == 401
    res = whep_post(studio, session.id, f"Bearer {session.audience.key}", whep_offer_sdp(loop))
    assert res.status_code == 201 and res.headers["content-type"].startswith("application/sdp")
    location = res.headers["location"]
    assert location.startswith(f"/whep/{session.id}/") and len(location.rsplit("/", 1)[1]) >= 20
    assert httpx.delete(studio.url + location).status_code == 401
    assert httpx.delete(studio.url + location, headers={"Authorization": "Bearer wrong"}).status_code == 401
    assert len(session.audience.watchers) == 1
    bearer = {"Authorization": f"Bearer {session.audience.key}"}
    assert httpx.delete(studio.url + location, headers=bearer).status_code == 200
    replay = httpx.delete(studio.url + location, headers=bearer)
    assert replay.status_code == 404 and "already ended" in replay.json()["error"]
    assert httpx.delete(f"{studio.url}/whep/{session.id}/guess", headers=bearer).status_code == 404
    assert httpx.patch(studio.url + location, headers=bearer).status_code == 405


def test_too_many_watchers_are_503_and_the_slot_frees(watched):
    studio, session, loop = watched
    bearer = f"Bearer {session.audience.key}"
    first = whep_post(studio, session.id, bearer, whep_offer_sdp(loop))
    assert first.status_code == 201
    second = whep_post(studio, session.id, bearer, whep_offer_sdp(loop))
    assert second.status_code == 503 and "already has 1 watcher(s)" in second.json()["error"]
    assert second.headers["retry-after"]
    assert httpx.delete(studio.url + first.headers["location"], headers={"Authorization": bearer}).status_code == 200
    third = whep_post(studio, session.id, bearer, whep_offer_sdp(loop))
    assert third.status_code == 201
    httpx.delete(studio.url + third.headers["location"], headers={"Authorization": bearer})


def test_the_ice_endpoint_never_hands_out_the_turn_secret():
    from webrtc.ice import IceConfig

    ice = IceConfig(("turn:127.0.0.1:3478",), turn_secret="do-not-leak")
    with BackgroundServer(Settings(port=0, ice=ice)) as server:
        res = httpx.get(f"{server.url}/api/webrtc/ice")
    assert res.status_code == 200 and "do-not-leak" not in res.text
    assert "do-not-leak" not in repr(ice) and "do-not-leak" not in repr(Settings(ice=ice))
