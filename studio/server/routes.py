"""REST routes under /api, the metrics page and the minimal player page."""

from __future__ import annotations

from importlib.resources import files

from fastapi import APIRouter, HTTPException, Request
from fastapi.responses import HTMLResponse, PlainTextResponse, Response

from renderer import RENDERERS
from studio import __version__
from studio.server.metrics import CONTENT_TYPE
from studio.server.models import ErrorBody, FeedInfo, Health, OfferAnswer, OfferRequest, SessionInfo, TakeRequest
from studio.server.session import LiveSession

router = APIRouter()
ERRORS = {400: {"model": ErrorBody}, 422: {"model": ErrorBody}, 503: {"model": ErrorBody}}


@router.post("/api/webrtc/offer", response_model=OfferAnswer, responses=ERRORS, tags=["webrtc"])
async def webrtc_offer(offer: OfferRequest, request: Request) -> OfferAnswer:
    """Start a live session: send the browser's SDP offer and the session options, get the SDP answer."""
    return await request.app.state.sessions.offer(offer)


@router.get("/api/health", response_model=Health, tags=["studio"])
async def health(request: Request) -> Health:
    st = request.app.state
    loaded = st.sessions.loaded_renderer(st.settings.renderer)     # never loads one: health must answer at once
    pool = st.sessions.pool
    workers = None
    if pool is not None:         # each worker with the live sessions it hosts (by the ids the API uses)
        hosted = [(s.id, getattr(s.rollout.session, "worker", None)) for s in list(st.sessions.sessions.values())]
        workers = [{**w, "session_ids": [sid for sid, host in hosted if host is not None and host.name == w["name"]]}
                   for w in pool.describe()]
    return Health(version=__version__, sessions=len(st.sessions.sessions), max_sessions=st.settings.max_sessions,
                  renderer=st.settings.renderer, renderers=list(RENDERERS), feeds=st.feeds.names(),
                  renderer_info=loaded.describe() if loaded is not None else None,
                  workers=workers)


def _session(request: Request, session_id: str) -> LiveSession:
    session = request.app.state.sessions.sessions.get(session_id)
    if session is None:
        raise HTTPException(404, f"no live session {session_id!r}")
    return session


def _info(s: LiveSession) -> SessionInfo:
    return SessionInfo(session_id=s.id, source=s.source_name, renderer=s.renderer_name, width=s.width,
                       height=s.height, fps=s.fps, frame=s.rollout.frame_index, frames_sent=s.track.frames_sent,
                       measured_fps=round(s.track.meter.fps, 2), state=s.state, codec=s.codec,
                       bitrate=getattr(s.encoder, "target_bitrate", None))


@router.get("/api/sessions", response_model=list[SessionInfo], tags=["sessions"])
async def list_sessions(request: Request) -> list[SessionInfo]:
    return [_info(s) for s in list(request.app.state.sessions.sessions.values())]


@router.get("/api/sessions/{session_id}", response_model=SessionInfo, tags=["sessions"])
async def get_session(session_id: str, request: Request) -> SessionInfo:
    return _info(_session(request, session_id))


@router.get("/api/sessions/{session_id}/schedule", tags=["sessions"])
async def get_schedule(session_id: str, request: Request) -> dict:
    """The session's schedule, live prompt switches included: save it to replay the session offline."""
    return _session(request, session_id).rollout.schedule.to_json()


@router.post("/api/sessions/{session_id}/take", responses=ERRORS, tags=["sessions"])
async def take(session_id: str, body: TakeRequest, request: Request) -> dict:
    """Start or stop recording a take of the session (docs/presenting.md); answers the take's status."""
    session = _session(request, session_id)
    message = session.start_take() if body.action == "start" else session.stop_take()
    return {k: v for k, v in message.items() if k not in ("type", "request")}


@router.delete("/api/sessions/{session_id}", status_code=204, tags=["sessions"])
async def end_session(session_id: str, request: Request) -> None:
    await request.app.state.sessions.end(_session(request, session_id), "ended over the API")


@router.get("/api/feeds", response_model=list[FeedInfo], tags=["engine feed"])
async def list_feeds(request: Request) -> list[FeedInfo]:
    return [FeedInfo(name=f.name, source=f"feed:{f.name}", width=f.hello.width, height=f.hello.height,
                     fps=f.hello.fps, frames=f.frames, subscribers=f.subscribers)
            for f in request.app.state.feeds.feeds()]


@router.get("/api/presets", tags=["studio"])
async def presets() -> list[str]:
    from prompt_presets import preset_names

    return preset_names()


@router.get("/metrics", response_class=PlainTextResponse, tags=["studio"])
async def metrics(request: Request) -> Response:
    """Prometheus exposition format (prometheus_client)."""
    return Response(request.app.state.metrics.exposition(), media_type=CONTENT_TYPE)


@router.get("/player", response_class=HTMLResponse, include_in_schema=False)
async def player() -> str:
    return files("studio.server").joinpath("player.html").read_text()
