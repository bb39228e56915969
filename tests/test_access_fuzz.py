"""Every route that needs a credential, fuzzed (issue 26): the routes are found on the app by the dependency that
guards them (deps.live_session, watched_session, visitor, admin), so a route added later is fuzzed too. Any
credential that is not the owner's or the admin's (another visitor's real key, near misses, garbage) and any id or
body are refused with one line, never let through and never a 5xx, while the owner's session streams on and
nothing it stored changes."""

from __future__ import annotations

from urllib.parse import quote

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from helpers.browser import ADMIN, AS_ADMIN, studio_with_ui
from helpers.fuzz import fuzz_settings
from helpers.loop import LoopThread
from helpers.routes import api_routes
from helpers.watch import start_owner
from studio.server import deps

GUARDS = {deps.live_session, deps.watched_session, deps.visitor, deps.admin}


def guarded(dependant) -> bool:
    return any(d.call in GUARDS or guarded(d) for d in dependant.dependencies)


def guarded_routes(app) -> list[tuple[str, str]]:
    return sorted((method, path) for path, route in api_routes(app) if guarded(route.dependant)
                  for method in route.methods - {"HEAD"})


@pytest.fixture(scope="module")
def owned(tmp_path_factory):
    """(studio, the owner's session, another visitor's real key, loop, the owner's viewer); it uploaded one file."""
    loop = LoopThread()
    with studio_with_ui(tmp_path_factory.mktemp("cache"), max_sessions=2, connect_timeout_s=60) as studio:
        owner = loop.run(start_owner(studio.url, source="engine", size="64x32"))
        put = httpx.put(f"{studio.url}/api/ui/uploads/kept.npy", headers=owner.auth, timeout=60, content=_npy())
        assert put.status_code == 200, put.text
        stranger = studio.app.state.visitors.admit(None).key
        yield studio, studio.sessions[owner.session_id], stranger, loop, owner
        loop.run(owner.close())
    loop.close()


def _npy() -> bytes:
    import io

    import numpy as np

    buf = io.BytesIO()
    np.save(buf, np.zeros((2, 5, 16, 24, 3), np.uint8))
    return buf.getvalue()


def test_the_guarded_routes_are_found_on_the_app(owned):
    routes = guarded_routes(owned[0].app)
    for expected in [("GET", "/api/sessions"), ("DELETE", "/api/sessions/{session_id}"),
                     ("POST", "/api/sessions/{session_id}/take"), ("GET", "/api/sessions/{session_id}/schedule"),
                     ("GET", "/api/ui/sessions/{session_id}/inspector"), ("POST", "/whep/{session_id}"),
                     ("PUT", "/api/ui/uploads/{name}"), ("DELETE", "/api/ui/takes/{take_id}"),
                     ("POST", "/api/ui/renders"), ("GET", "/api/ui/renders/{job_id}")]:
        assert expected in routes, expected
    unguarded = {(m, p) for p, r in api_routes(owned[0].app) for m in r.methods - {"HEAD"}} - set(routes)
    assert ("POST", "/api/webrtc/offer") in unguarded and ("GET", "/api/health") in unguarded


@fuzz_settings(150, deadline_ms=30_000)
@given(data=st.data())
def test_every_guarded_route_refuses_any_credential_but_the_owners_and_the_admins(owned, data):
    studio, session, stranger, _, _ = owned
    owner = session.owner_key
    method, template = data.draw(st.sampled_from(guarded_routes(studio.app)))
    key = data.draw(st.sampled_from([stranger, owner[:-1], owner + "x", owner.upper(), ADMIN[:-1], ADMIN + "x",
                                     f"Basic {owner}", f"Basic {ADMIN}", "", "Bearer", f"Bearer {owner} {owner}"])
                    | st.text(max_size=40))
    authorization = key if key.startswith(("Basic", "Bearer")) or not key else f"Bearer {key}"
    authorization = "".join(c for c in authorization if c.isprintable()).strip()   # what HTTP can carry
    ident = st.sampled_from([session.id, "nope", "..", "20260101-000000-abcdef", "kept.npy"]) | st.text(
        alphabet=st.characters(min_codepoint=48, max_codepoint=122), min_size=1, max_size=16)
    path = template
    for name in ("session_id", "watcher_id", "name", "take_id", "job_id"):
        path = path.replace("{" + name + "}", quote(data.draw(ident), safe=""))
    body = data.draw(st.sampled_from([None, {}, {"action": "start"}, {"source": "kept.npy", "frames": 2,
                                      "schedule": {"version": 1, "segments": []}}]))
    content = data.draw(st.sampled_from([None, b"", b"v=0\r\n", _npy()])) if method in ("PUT", "POST") else None
    kwargs = {"content": content} if content is not None else {"json": body}
    res = httpx.request(method, studio.url + path, timeout=30,
                        headers={"Authorization": authorization.encode("utf-8", "surrogateescape")}, **kwargs)
    assert res.status_code in (401, 404, 405, 422), (method, path, authorization, res.status_code, res.text)
    error = res.json()["error"]
    assert error and "\n" not in error and owner not in res.text and ADMIN not in res.text
    assert session.state == "playing" and session.takes.recorder is None


def test_the_owner_streamed_on_and_kept_its_upload(owned):
    studio, session, _, loop, owner = owned
    loop.run(owner.wait_frames(len(owner.frames) + 5))
    assert session.state == "playing" and session.id in studio.sessions
    assert sorted(p.name for p in (studio.settings.data_dir / "uploads").iterdir()) == ["kept.npy"]
    assert httpx.get(f"{studio.url}/api/sessions/{session.id}", headers=AS_ADMIN, timeout=30).status_code == 200
