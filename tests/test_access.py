"""Who may do what (issue 26): a second visitor, a real aiortc peer with a session of its own, tries every
session route on the first visitor's session with no key, a wrong key and its own key, and is refused with the
same one line whether the session exists or not, while the first visitor streams on; the owner's key and the
admin token succeed. Uploads, takes and render jobs belong to the visitor who made them, within their limits;
no answer names a server path. (The page's side: tests/test_ui_visitor_browser.py.)"""

from __future__ import annotations

import io
import os

import httpx
import numpy as np
import pytest
from fastapi.testclient import TestClient

from gbuffer.formats import write_npy_windows
from helpers.browser import ADMIN, AS_ADMIN, studio_with_ui, wait_until
from helpers.loop import LoopThread
from helpers.routes import api_routes
from helpers.watch import recvonly_offer_sdp, start_owner
from renderer.reference.synthetic import synthetic_gbuffer
from studio.server import Settings, create_app
from studio.server.access import KEY_BYTES, DiskLimits, QuotaFull, Visitor, Visitors, new_key, same_key
from studio.server.owners import Folders
from studio.ui import mount_ui
from webrtc.client import WhepViewer

NOBODY = "0123456789ab"          # a session id that does not exist
SCHEDULE = {"version": 1, "fps": 30, "segments": [{"start": 0, "prompts": [{"preset": "polar"}]}]}


def npy_bytes(frames: int = 2) -> bytes:
    buf = io.BytesIO()
    np.save(buf, np.random.default_rng(1).integers(0, 256, (frames, 5, 16, 24, 3), dtype=np.uint8))
    return buf.getvalue()


def folders(data) -> Folders:
    """A data dir's visitors' folders, as the app lays them out."""
    return Folders(data, data / "takes", data / ".alaya-owners.json")


def bearer(key: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"} if key else {}


# ---- keys and limits, without a server -----------------------------------------------------------------------

def test_owner_keys_are_192_random_bits_and_compare_only_equal():
    keys = {new_key() for _ in range(100)}
    assert len(keys) == 100 and KEY_BYTES * 8 == 192
    assert all(len(k) == 32 for k in keys)                   # base64url of 24 bytes
    key = keys.pop()
    assert same_key(key, key) and not same_key(key + "x", key) and not same_key(key[:-1], key)
    assert not same_key(None, key) and not same_key("", "") and not same_key("ünï", key)


def test_a_visitor_keeps_its_key_across_offers_and_the_admin_is_never_a_visitor(tmp_path):
    visitors = Visitors("the-admin-token-0123", DiskLimits(), lambda: folders(tmp_path))
    first = visitors.admit(None)
    assert visitors.admit(first.key) is first and visitors.find(first.key) is first
    assert visitors.admit("made-up") is not first and visitors.find("made-up") is None
    own = visitors.admit("the-admin-token-0123")              # the admin's sessions get keys of their own
    assert not own.admin and own.key != "the-admin-token-0123"
    assert visitors.find("the-admin-token-0123").admin and visitors.is_admin("the-admin-token-0123")
    assert not Visitors(None, DiskLimits(), lambda: folders(tmp_path)).is_admin("")


def test_counts_are_429_and_the_byte_quota_is_507_and_nothing_stored_is_touched(tmp_path):
    (tmp_path / "a.npy").write_bytes(bytes(64 * 1024))
    visitors = Visitors(None, DiskLimits(max_uploads=1, max_takes=1, disk_quota=10**9), lambda: folders(tmp_path))
    visitor = Visitor("k", uploads=[tmp_path / "a.npy"])
    with pytest.raises(QuotaFull) as full:
        visitors.room(visitor, "uploads")
    assert full.value.status == 429 and "delete one" in str(full.value)
    assert visitors.room(visitor, "uploads", replacing=True) > 0 and visitors.room(visitor, "takes") > 0
    tight = Visitors(None, DiskLimits(disk_quota=64 * 1024), lambda: folders(tmp_path))
    with pytest.raises(QuotaFull) as full:
        tight.room(Visitor("other"), "takes")
    assert full.value.status == 507 and (tmp_path / "a.npy").stat().st_size == 64 * 1024


def test_an_upload_past_the_byte_quota_is_507_and_the_stored_ones_stay(tmp_path):
    app = create_app(Settings(data_dir=tmp_path, admin_token=ADMIN, disk=DiskLimits(disk_quota=20_000)),
                     player_at_root=False)
    mount_ui(app, cache_dir=tmp_path / "cache", prewarm_thumbnails=False)
    with TestClient(app, headers=AS_ADMIN) as client:
        assert client.put("/api/ui/uploads/one.npy", content=npy_bytes()).status_code == 200
        stored = (tmp_path / "uploads" / "one.npy").read_bytes()
        res = client.put("/api/ui/uploads/two.npy", content=npy_bytes())
        assert res.status_code == 507 and "quota" in res.json()["error"] and "\n" not in res.json()["error"]
        res = client.put("/api/ui/uploads/one.npy", content=npy_bytes(3))     # a larger replacement
        assert res.status_code == 507
        assert (tmp_path / "uploads" / "one.npy").read_bytes() == stored
        assert not (tmp_path / "uploads" / "two.npy").exists()
        assert client.put("/api/ui/uploads/x.npy", content=npy_bytes(), headers={"Authorization": ""}).status_code \
            == 401


# ---- two visitors on a running studio ------------------------------------------------------------------------

@pytest.fixture(scope="module")
def studio(tmp_path_factory):
    data = tmp_path_factory.mktemp("data")
    write_npy_windows([synthetic_gbuffer(64, 32, i / 30, i) for i in range(30)], data / "seq")
    (data / "broken.npy").write_bytes(b"\x93NUMPY garbage that is no array")
    with studio_with_ui(tmp_path_factory.mktemp("cache"), max_sessions=4, data_dir=data, connect_timeout_s=60,
                        disk=DiskLimits(max_uploads=2, max_takes=1, disk_quota=512 * 2**20)) as server:
        yield server


@pytest.fixture(scope="module")
def visitors(studio):
    """(first, second, loop): two visitors streaming sessions of their own."""
    loop = LoopThread()
    first = loop.run(start_owner(studio.url, source="engine", size="64x32", stamp=False))
    second = loop.run(start_owner(studio.url, source="seq", size="64x32"))
    yield first, second, loop
    for viewer in (first, second):
        loop.run(viewer.close())
    loop.close()


def session_routes(app) -> list[tuple[str, str]]:
    """Every (method, path) that names a session: found on the app, so a route added later is tried too."""
    return sorted((method, path) for path, route in api_routes(app) if "{session_id}" in path
                  for method in route.methods if method != "HEAD")


def request(studio, method: str, path: str, session_id: str, headers: dict) -> httpx.Response:
    url = studio.url + path.format(session_id=session_id, watcher_id="w0")
    kwargs = {}
    if path.endswith("/take"):
        kwargs["json"] = {"action": "start"}
    if path == "/whep/{session_id}" and method == "POST":
        kwargs = {"content": "v=0\r\n", "headers": {"Content-Type": "application/sdp"}}
    kwargs.setdefault("headers", {}).update(headers)
    return httpx.request(method, url, timeout=60, **kwargs)


def test_a_second_visitor_is_refused_on_every_route_of_the_first_ones_session(studio, visitors):
    first, second, loop = visitors
    routes = session_routes(studio.app)
    assert ("DELETE", "/api/sessions/{session_id}") in routes and ("GET", "/api/ui/sessions/{session_id}/inspector") \
        in routes and ("POST", "/whep/{session_id}") in routes and len(routes) >= 9
    watch_key = next(m for m in first.messages if m["type"] == "hello")["watch"]["key"]
    before = len(first.frames)
    tried = 0
    for method, path in routes:
        watch_route = path.startswith(("/whep", "/studio/watch"))
        credentials = [None, "Bearer wrong-key", f"Bearer {second.owner_key}", f"Basic {first.owner_key}",
                       f"Bearer {first.owner_key}x"] + ([] if watch_route else [f"Bearer {watch_key}"])
        for credential in credentials:
            headers = {"Authorization": credential} if credential else {}
            res = request(studio, method, path, first.session_id, headers)
            probe = request(studio, method, path, NOBODY, headers)
            assert res.status_code == 401, (method, path, credential, res.status_code, res.text)
            assert res.json() == probe.json() and probe.status_code == 401, (method, path)   # nothing to probe
            assert "\n" not in res.json()["error"] and first.owner_key not in res.text
            tried += 1
    assert studio.sessions[first.session_id].state == "playing"
    # the first visitor streamed on through all of it (frames arrive; none of it reached the session)
    loop.run(first.wait_frames(before + 15, timeout=120))
    assert tried >= 50


def test_the_owner_and_the_admin_get_through_and_listing_is_the_admins(studio, visitors):
    first, second, loop = visitors
    for headers in (first.auth, AS_ADMIN):
        info = httpx.get(f"{studio.url}/api/sessions/{first.session_id}", headers=headers, timeout=60)
        assert info.status_code == 200 and info.json()["session_id"] == first.session_id
        schedule = httpx.get(f"{studio.url}/api/sessions/{first.session_id}/schedule", headers=headers, timeout=60)
        assert schedule.status_code == 200 and schedule.json()["segments"]
        shot = httpx.get(f"{studio.url}/api/ui/sessions/{first.session_id}/inspector.png", headers=headers,
                         timeout=60)
        assert shot.status_code == 200 and shot.headers["content-type"] == "image/png"
        about = httpx.get(f"{studio.url}/api/ui/sessions/{first.session_id}/inspector", headers=headers, timeout=60)
        assert about.status_code == 200 and set(about.json()) == {"frame", "label", "meta"}, about.text
        assert about.json()["frame"] >= 0 and "speed" in about.json()["meta"]          # the kart's, from the engine
        whep = request(studio, "POST", "/whep/{session_id}", first.session_id, headers)
        assert whep.status_code == 400 and whep.json()["where"] == "sdp"      # let in: only the SDP was bad
    for headers in ({}, first.auth, second.auth, bearer(next(m for m in first.messages
                                                                if m["type"] == "hello")["watch"]["key"])):
        res = httpx.get(f"{studio.url}/api/sessions", headers=headers, timeout=60)
        assert res.status_code == 401 and "admin token" in res.json()["error"]
    listed = httpx.get(f"{studio.url}/api/sessions", headers=AS_ADMIN, timeout=60).json()
    assert {first.session_id, second.session_id} <= {s["session_id"] for s in listed}
    assert httpx.get(f"{studio.url}/api/health", timeout=60).json()["sessions"] >= 2   # the count is public


def test_the_owner_key_reaches_only_the_owner(studio, visitors):
    first, _, loop = visitors
    hello = next(m for m in first.messages if m["type"] == "hello")
    assert hello["owner_key"] == first.owner_key and len(first.owner_key) == 32

    async def watcher_hello():
        watcher = await WhepViewer(studio.url, first.session_id, hello["watch"]["key"], status=True,
                                   keep_pixels=False).start()
        try:
            return await watcher.wait_message("hello")
        finally:
            await watcher.close()
    seen = loop.run(watcher_hello())
    assert seen["role"] == "watcher" and "owner_key" not in seen and first.owner_key not in str(seen)


def test_an_offer_with_the_visitors_key_starts_another_session_of_the_same_visitor(studio, visitors):
    first, _, loop = visitors
    sdp = loop.run(recvonly_offer_sdp(data_channel=True))
    offer = {"sdp": sdp, "type": "offer", "source": "demo", "size": "64x32"}
    again = httpx.post(f"{studio.url}/api/webrtc/offer", json=offer, headers=first.auth, timeout=60).json()
    stranger = httpx.post(f"{studio.url}/api/webrtc/offer", json=offer, headers=bearer("made-up"), timeout=60).json()
    assert again["owner_key"] == first.owner_key and stranger["owner_key"] not in (first.owner_key, "made-up")
    for answer in (again, stranger):      # never connected: ended by their owners
        res = httpx.delete(f"{studio.url}/api/sessions/{answer['session_id']}", headers=bearer(answer["owner_key"]),
                           timeout=60)
        assert res.status_code == 204


def test_uploads_belong_to_their_visitor_and_a_visitor_holds_at_most_n(studio, visitors):
    first, second, loop = visitors
    def put(name, who, frames=2):
        return httpx.put(f"{studio.url}/api/ui/uploads/{name}", content=npy_bytes(frames), headers=who,
                         timeout=60)
    assert put("mine.npy", {}).status_code == 401
    assert put("mine.npy", bearer("made-up")).status_code == 401
    assert put("mine.npy", first.auth).status_code == 200 and put("mine2.npy", first.auth).status_code == 200
    full = put("mine3.npy", first.auth)
    assert full.status_code == 429 and "2 uploads" in full.json()["error"]
    assert put("mine.npy", first.auth, 3).json()["frames"] == 3            # replacing one is not one more
    taken = put("mine.npy", second.auth)
    assert taken.status_code == 409 and "another visitor" in taken.json()["error"]
    # another visitor's upload is not offered to the second one, nor playable, nor renderable by it
    def listed(who):
        return {s["id"] for s in httpx.get(f"{studio.url}/api/ui/sources", headers=who, timeout=60).json()}
    assert "uploads/mine.npy" in listed(first.auth) and "uploads/mine.npy" not in listed(second.auth) | listed({})
    assert "seq" in listed(second.auth)                       # the data dir's own sequences are everyone's
    sdp = loop.run(recvonly_offer_sdp(data_channel=True))
    offer = httpx.post(f"{studio.url}/api/webrtc/offer", headers=second.auth, timeout=60,
                       json={"sdp": sdp, "type": "offer", "source": "uploads/../uploads/mine.npy"})
    assert offer.status_code == 400 and "no sequence" in offer.json()["error"]
    render = httpx.post(f"{studio.url}/api/ui/renders", headers=second.auth, timeout=60,
                        json={"schedule": SCHEDULE, "source": "uploads/mine.npy", "frames": 2})
    assert render.status_code == 400 and "no sequence" in render.json()["error"]
    uploads = studio.settings.data_dir / "uploads"
    assert sorted(p.name for p in uploads.iterdir()) == ["mine.npy", "mine2.npy"]
    assert httpx.delete(f"{studio.url}/api/ui/uploads/mine2.npy", headers=second.auth).status_code == 404
    assert httpx.delete(f"{studio.url}/api/ui/uploads/mine2.npy", headers=first.auth).status_code == 204
    assert put("mine3.npy", first.auth).status_code == 200
    assert httpx.delete(f"{studio.url}/api/ui/uploads/mine3.npy", headers=AS_ADMIN).status_code == 204


@pytest.mark.parametrize("folder", ["uploads", "uploads/", "uploads/.", "./uploads", "takes", "seq/../uploads"])
def test_the_visitors_folders_themselves_are_no_source(studio, visitors, folder):
    """Issue 42, finding 2: the uploads folder named as a source played every visitor's .npy in it as one
    sequence (a folder is not inside itself). A folder is a visitor's file like any other: only its owner (nobody,
    for the folder itself) or the admin may play it."""
    first, second, loop = visitors
    secret = httpx.put(f"{studio.url}/api/ui/uploads/victimsecret.npy", content=npy_bytes(), headers=second.auth,
                       timeout=60)
    assert secret.status_code == 200, secret.text
    try:
        sdp = loop.run(recvonly_offer_sdp(data_channel=True))
        offer = httpx.post(f"{studio.url}/api/webrtc/offer", headers=first.auth, timeout=60,
                           json={"sdp": sdp, "type": "offer", "source": folder, "size": "64x32"})
        assert offer.status_code == 400 and "no sequence" in offer.json()["error"], offer.status_code
        render = httpx.post(f"{studio.url}/api/ui/renders", headers=first.auth, timeout=60,
                            json={"schedule": SCHEDULE, "source": folder, "frames": 2})
        assert render.status_code == 400 and "no sequence" in render.json()["error"], render.status_code
    finally:
        assert httpx.delete(f"{studio.url}/api/ui/uploads/victimsecret.npy", headers=second.auth,
                            timeout=60).status_code == 204


def test_an_upload_cannot_pair_with_another_visitors_window(studio, visitors):
    """X.npy and X.rgb.npy are read as one sequence: a second visitor's X.rgb.npy beside the first one's X.npy
    would change what the first one plays (and its errors would describe the first one's file)."""
    first, second, _ = visitors
    def put(name, who):
        return httpx.put(f"{studio.url}/api/ui/uploads/{name}", content=npy_bytes(), headers=who, timeout=60)
    assert put("pair.npy", first.auth).status_code == 200
    try:
        taken = put("pair.rgb.npy", second.auth)
        assert taken.status_code == 409 and "pair with another visitor's upload" in taken.json()["error"]
        assert not (studio.settings.data_dir / "uploads" / "pair.rgb.npy").exists()
    finally:
        assert httpx.delete(f"{studio.url}/api/ui/uploads/pair.npy", headers=first.auth).status_code == 204


def test_takes_count_against_their_visitor_and_answers_name_no_server_path(studio, visitors):
    first, second, loop = visitors
    take = f"{studio.url}/api/sessions/{second.session_id}/take"
    mark = len(second.messages)
    started = httpx.post(take, json={"action": "start"}, headers=second.auth, timeout=60).json()
    assert started["path"] == f"takes/{started['take_id']}"
    # frames in the take before it stops: a take of no frames is not offered as a source, and on a loaded
    # machine a stop right after the start could land before the first frame
    loop.run(second.wait_until(lambda: any(m.get("type") == "status" and m.get("take", {}).get("frames", 0) >= 3
                                           for m in second.messages[mark:]), 120, "3 frames in the take"))
    assert httpx.post(take, json={"action": "stop"}, headers=second.auth, timeout=60).status_code == 200
    stopped = loop.run(second.wait_message("take", state="stopped", timeout=120))
    assert stopped["frames"] > 0, stopped
    source = f"take:{started['take_id']}"
    def shown(who):
        return source in {s["id"] for s in httpx.get(f"{studio.url}/api/ui/sources", headers=who).json()}
    assert shown(second.auth) and not shown(first.auth) and shown(AS_ADMIN)
    schedule = f"{studio.url}/api/ui/takes/{started['take_id']}/schedule"
    assert httpx.get(schedule, headers=first.auth).status_code == 400
    assert httpx.get(schedule, headers=second.auth).json()["segments"]
    full = httpx.post(take, json={"action": "start"}, headers=second.auth, timeout=60)
    assert full.status_code == 429 and "1 takes" in full.json()["error"]
    mark = len(second.messages)
    loop.run(second.send({"type": "take", "action": "start"}))             # the data channel: the same rule
    error = loop.run(second.wait_message("error", after=mark))
    assert "1 takes" in error["message"]
    delete = f"{studio.url}/api/ui/takes/{started['take_id']}"
    assert httpx.delete(delete, headers=first.auth, timeout=60).status_code == 404
    assert httpx.delete(delete, headers=second.auth, timeout=60).status_code == 204
    assert not (studio.settings.takes_path / started["take_id"]).exists()


def test_render_jobs_answer_only_to_the_visitor_who_started_them(studio, visitors):
    first, second, loop = visitors
    body = {"schedule": SCHEDULE, "source": "seq", "frames": 4, "size": "64x32"}
    assert httpx.post(f"{studio.url}/api/ui/renders", json=body, timeout=60).status_code == 401
    job = httpx.post(f"{studio.url}/api/ui/renders", json=body, headers=first.auth, timeout=60).json()
    status = f"{studio.url}/api/ui/renders/{job['id']}"
    assert httpx.get(status, timeout=60).status_code == 401
    assert httpx.get(status, headers=second.auth, timeout=60).status_code == 404
    assert httpx.get(status, headers=AS_ADMIN, timeout=60).status_code == 200
    finished = wait_until(lambda: (j := httpx.get(status, headers=first.auth, timeout=60).json())["state"] != "running"
                          and j, 180, "the render job to finish")
    assert finished["state"] == "done", finished
    video = f"{studio.url}{finished['download']}"
    assert httpx.get(video, headers=second.auth, timeout=60).status_code == 404
    assert httpx.get(video, headers=first.auth, timeout=60).content[4:8] == b"ftyp"


def test_no_answer_names_the_data_dir(studio, visitors):
    """Every route, with real requests as the owner and as the admin, broken files included: the data dir's
    absolute path (and the takes folder's) never appears in an answer."""
    first, _, loop = visitors
    data = studio.settings.data_dir
    secrets_of_the_server = {str(data), os.path.realpath(data), str(studio.settings.takes_path.absolute())}
    sdp = loop.run(recvonly_offer_sdp(data_channel=True))
    values = {"session_id": first.session_id, "watcher_id": "w0", "name": "broken.npy", "job_id": "nope",
              "take_id": "20260101-000000-abcdef"}
    bodies = [None, {}, {"source": "broken.npy", "schedule": SCHEDULE, "frames": 2, "action": "start",
                         "sdp": sdp, "type": "offer", "text": "0: polar"}]
    answers = []
    for template, route in api_routes(studio.app):
        if template == "/api/sessions/{session_id}" and "DELETE" in route.methods:
            continue                    # it would end the session the other routes need
        path = template.format(**{k: v for k, v in values.items() if "{" + k + "}" in template})
        for method in route.methods - {"HEAD"}:
            for body in bodies:
                for headers in (first.auth, AS_ADMIN):
                    kwargs = {"json": body} if body is not None else {}
                    if method == "PUT":
                        kwargs = {"content": b"\x93NUMPY garbage"}
                    answers.append(httpx.request(method, studio.url + path, headers=headers, timeout=60, **kwargs))
    answers.append(httpx.post(f"{studio.url}/api/webrtc/offer", headers=first.auth, timeout=60,
                              json={"sdp": sdp, "type": "offer", "source": "broken.npy", "size": "64x32"}))
    refused = [a for a in answers if a.status_code >= 400]
    assert len(answers) > 60 and any("broken.npy" in a.text for a in refused)    # the broken file was named
    for answer in answers:
        text = answer.text + " ".join(f"{k}: {v}" for k, v in answer.headers.items())
        leaked = [s for s in secrets_of_the_server if s in text]
        assert not leaked, (answer.request.method, answer.request.url, answer.status_code, answer.text[:300])
    channel = " ".join(map(str, first.messages))              # the data channel's answers too (takes' paths)
    assert not [s for s in secrets_of_the_server if s in channel]


def test_the_owner_ends_the_session_the_second_visitor_could_not(studio, visitors):
    first, second, loop = visitors
    url = f"{studio.url}/api/sessions/{first.session_id}"
    assert httpx.delete(url, headers=second.auth, timeout=60).status_code == 401
    assert studio.sessions[first.session_id].state == "playing"
    assert httpx.delete(url, headers=first.auth, timeout=60).status_code == 204
    wait_until(lambda: first.session_id not in studio.sessions, 30, "the ended session to go")
    assert httpx.delete(f"{studio.url}/api/sessions/{second.session_id}", headers=AS_ADMIN,
                        timeout=60).status_code == 204
