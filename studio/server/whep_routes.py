"""Watching a session without steering it: WHEP playback and the audience's watch page.

- `POST /whep/{session_id}` (body `application/sdp`, `Authorization: Bearer KEY`) → 201, the SDP answer and a
  `Location` for this playback; `DELETE` that location → 200. WHEP is the WebRTC-HTTP Egress Protocol
  (draft-ietf-wish-whep), so standard players can pull a session. KEY is the session's watch key (the owner's
  `hello.watch.key`) or the studio's `--token`. The 201 also lists the studio's ICE servers as
  `Link: <url>; rel="ice-server"` headers. Trickle ICE (PATCH) is not offered: answers carry every
  candidate.
- `GET /studio/watch/{session_id}?key=KEY`: the read-only watch page (video, active prompt, frame), itself a
  WHEP client that also opens a data channel for the session's status.
"""

from __future__ import annotations

from importlib.resources import files

from fastapi import APIRouter, HTTPException, Request
from fastapi.responses import HTMLResponse, Response

from studio.server import watchers
from studio.server.models import ErrorBody
from studio.server.session import LiveSession

router = APIRouter(tags=["watch"])
MAX_SDP_BYTES = 100_000
SDP = "application/sdp"
ERRORS = {code: {"model": ErrorBody} for code in (400, 401, 404, 413, 415, 502, 503)}


def _session(request: Request, session_id: str) -> LiveSession:
    session = request.app.state.sessions.sessions.get(session_id)
    if session is None or session.state == "closed":
        raise HTTPException(404, f"no live session {session_id!r} (it may have ended)")
    return session


def _authorised(request: Request, session: LiveSession, presented: str | None) -> None:
    if not session.audience.admits(presented, request.app.state.settings.token):
        raise HTTPException(401, "a watch key is required: Authorization: Bearer KEY (the key the session's "
                            "owner shares) or ?key=KEY on a watch link; this one is missing or wrong",
                            headers={"WWW-Authenticate": 'Bearer realm="alaya-studio"'})


def _bearer(request: Request) -> str | None:
    auth = request.headers.get("authorization", "")
    return auth[7:].strip() if auth[:7].lower() == "bearer " else None


@router.post("/whep/{session_id}", status_code=201, response_class=Response, responses=ERRORS,
             openapi_extra={"requestBody": {"content": {SDP: {"schema": {"type": "string"}}}, "required": True}})
async def whep_offer(session_id: str, request: Request) -> Response:
    """Start a WHEP playback of a live session: the body is the player's SDP offer; the answer comes back with
    `Location`, the resource to DELETE when done."""
    session = _session(request, session_id)
    _authorised(request, session, _bearer(request))
    if request.headers.get("content-type", "").split(";")[0].strip().lower() != SDP:
        raise HTTPException(415, f"the body must be an SDP offer sent as Content-Type: {SDP}")
    body = await request.body()
    if len(body) > MAX_SDP_BYTES:
        raise HTTPException(413, f"an SDP offer of {len(body)} bytes exceeds {MAX_SDP_BYTES}")
    try:
        sdp = body.decode("utf-8")
    except UnicodeDecodeError:
        raise HTTPException(400, "the SDP offer is not UTF-8 text") from None
    settings = request.app.state.settings
    watcher, answer = await watchers.admit(session, sdp, settings)
    headers = {"Location": f"/whep/{session_id}/{watcher.id}"}
    if (links := settings.ice.link_header(f"{session_id}-w")) is not None:
        headers["Link"] = links  # the studio's STUN/TURN servers, for players that use them (ICE restarts)
    return Response(answer, status_code=201, media_type=SDP, headers=headers)


@router.delete("/whep/{session_id}/{watcher_id}", responses=ERRORS)
async def whep_stop(session_id: str, watcher_id: str, request: Request) -> dict:
    """End one WHEP playback; the session and its other watchers go on."""
    session = _session(request, session_id)
    _authorised(request, session, _bearer(request))
    if not await session.audience.remove(watcher_id):
        raise HTTPException(404, "no such playback (already ended?)")
    return {"ended": True}


@router.patch("/whep/{session_id}/{watcher_id}", status_code=405, include_in_schema=False)
async def whep_trickle(session_id: str, watcher_id: str) -> None:
    raise HTTPException(405, "trickle ICE is not supported: the answer carries every candidate",
                        headers={"Allow": "DELETE"})


@router.get("/studio/watch/{session_id}", response_class=HTMLResponse, responses=ERRORS)
async def watch_page(session_id: str, request: Request, key: str | None = None) -> str:
    """The audience's page for a watch link."""
    _authorised(request, _session(request, session_id), key)
    return files("studio.server").joinpath("watch.html").read_text()
