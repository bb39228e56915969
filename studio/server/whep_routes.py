"""Watching a session without steering it: WHEP playback and the audience's watch page.

- `POST /whep/{session_id}` (body `application/sdp`, `Authorization: Bearer KEY`) → 201, the SDP answer
  and a `Location` for this playback; `DELETE` that location → 200. WHEP is the WebRTC-HTTP Egress Protocol
  (draft-ietf-wish-whep), so standard players can pull a session. KEY is the session's watch key (the owner's
  `hello.watch.key`), the owner's key, the admin token or the studio's `--token` (deps.watched_session). The
  201 also lists the studio's ICE servers as `Link: <url>; rel="ice-server"` headers. Trickle ICE (PATCH) is
  not offered: answers carry every candidate.
- `GET /studio/watch/{session_id}?key=KEY`: the read-only watch page (video, active prompt, frame), itself a
  WHEP client that also opens a data channel for the session's status. A browser that opens a stale or wrong
  link gets a page saying in plain words that the show is over (same status, 401 or 404); other clients get
  the usual JSON error.
"""

from __future__ import annotations

from importlib.resources import files

from fastapi import APIRouter, HTTPException, Request
from fastapi.responses import HTMLResponse, Response
from pydantic import BaseModel

from studio.server import watchers
from studio.server.deps import KeyDep, ManagerDep, SettingsDep, VisitorsDep, WatchedDep, watched_session
from studio.server.models import ErrorBody, Responses

MAX_SDP_BYTES = 100_000
SDP = "application/sdp"
ERRORS: Responses = {code: {"model": ErrorBody} for code in (400, 401, 404, 413, 415, 502, 503)}
whep = APIRouter(prefix="/whep", tags=["watch"], responses=ERRORS)
watch_page = APIRouter(prefix="/studio/watch", tags=["watch"], responses={c: ERRORS[c] for c in (401, 404)})
routers = (whep, watch_page)


class PlaybackEnded(BaseModel):
    ended: bool = True


@whep.post("/{session_id}", status_code=201, response_class=Response,
           responses={201: {"content": {SDP: {"schema": {"type": "string"}}},
                            "description": "the SDP answer; `Location`: this playback, to DELETE when done"}},
           openapi_extra={"requestBody": {"content": {SDP: {"schema": {"type": "string"}}}, "required": True}})
async def whep_offer(session: WatchedDep, settings: SettingsDep, request: Request) -> Response:
    """Start a WHEP playback of a live session: the body is the player's SDP offer; the answer comes back with
    `Location`, the resource to DELETE when done."""
    if request.headers.get("content-type", "").split(";")[0].strip().lower() != SDP:
        raise HTTPException(415, f"the body must be an SDP offer sent as Content-Type: {SDP}")
    body = await request.body()
    if len(body) > MAX_SDP_BYTES:
        raise HTTPException(413, f"an SDP offer of {len(body)} bytes exceeds {MAX_SDP_BYTES}")
    try:
        sdp = body.decode("utf-8")
    except UnicodeDecodeError:
        raise HTTPException(400, "the SDP offer is not UTF-8 text") from None
    watcher, answer = await watchers.admit(session, sdp, settings)
    headers = {"Location": f"/whep/{session.id}/{watcher.id}"}
    if (links := settings.ice.link_header(f"{session.id}-w")) is not None:
        headers["Link"] = links  # the studio's STUN/TURN servers, for players that use them (ICE restarts)
    return Response(answer, status_code=201, media_type=SDP, headers=headers)


@whep.delete("/{session_id}/{watcher_id}", response_model=PlaybackEnded)
async def whep_stop(watcher_id: str, session: WatchedDep) -> PlaybackEnded:
    """End one WHEP playback; the session and its other watchers go on."""
    if not await session.audience.remove(watcher_id):
        raise HTTPException(404, "no such playback (already ended?)")
    return PlaybackEnded()


@whep.patch("/{session_id}/{watcher_id}", status_code=405, include_in_schema=False)
async def whep_trickle(watcher_id: str, session: WatchedDep) -> None:
    raise HTTPException(405, "trickle ICE is not supported: the answer carries every candidate",
                        headers={"Allow": "DELETE"})


def _page(name: str) -> str:
    return files("studio.server").joinpath(name).read_text()


@watch_page.get("/{session_id}", response_class=HTMLResponse)
async def watch(session_id: str, manager: ManagerDep, settings: SettingsDep, visitors: VisitorsDep,
                presented: KeyDep, request: Request, key: str | None = None) -> HTMLResponse:
    """The audience's page for a watch link (`key`: the watch key, checked by deps.watched_session). A browser
    with a link whose session has ended (or a wrong key) gets a plain "this show is over" page, not JSON."""
    try:
        watched_session(session_id, manager, settings, visitors, presented, request)
    except HTTPException as refused:
        if "text/html" not in request.headers.get("accept", ""):
            raise
        return HTMLResponse(_page("watch_over.html"), status_code=refused.status_code, headers=refused.headers)
    return HTMLResponse(_page("watch.html"))
