"""REST routes under /api, the metrics page and the minimal player page.

One router per concern, each with its prefix and tag (as /docs groups them); a route gets what it needs from
studio.server.deps and answers a response model, so /docs documents every body.
"""

from __future__ import annotations

from importlib.resources import files
from typing import Literal

from fastapi import APIRouter, HTTPException, Request
from fastapi.responses import HTMLResponse, PlainTextResponse, Response
from pydantic import BaseModel

from prompt_presets import preset_names
from prompt_presets.matching import matching_ready
from renderer import RENDERERS
from studio import __version__
from timeline.schedule import Schedule
from studio.server.deps import (AdminDep, FeedsDep, KeyDep, ManagerDep, MetricsDep, ScraperDep, SessionDep,
                                SettingsDep, VisitorsDep, live_sessions)
from studio.server.metrics import CONTENT_TYPE
from studio.server.models import (ErrorBody, Responses, Health, OfferAnswer, OfferRequest, OscTarget, SessionInfo,
                                  TakeRequest)
from studio.server.session import LiveSession
from webrtc import protocol as dc
from webrtc.ice import IceServer

ERRORS: Responses = {400: {"model": ErrorBody}, 422: {"model": ErrorBody}, 503: {"model": ErrorBody}}
NOT_FOUND: Responses = {401: {"model": ErrorBody}, 404: {"model": ErrorBody}}   # 401 first: ids cannot be probed

webrtc_api = APIRouter(prefix="/api/webrtc", tags=["webrtc"])
studio_api = APIRouter(prefix="/api", tags=["studio"])
sessions_api = APIRouter(prefix="/api/sessions", tags=["sessions"])
pages = APIRouter(tags=["studio"])         # at the root: /metrics (Prometheus' default path), the pages' files
routers = (webrtc_api, studio_api, sessions_api, pages)


class BrowserIceConfiguration(BaseModel):
    """An RTCConfiguration in the W3C dictionary's own names: the page calls `new RTCPeerConnection(this)`."""

    iceServers: list[IceServer]
    iceTransportPolicy: Literal["all", "relay"]


@webrtc_api.post("/offer", response_model=OfferAnswer, responses=ERRORS)
async def webrtc_offer(offer: OfferRequest, manager: ManagerDep, visitors: VisitorsDep, key: KeyDep,
                       settings: SettingsDep, request: Request) -> OfferAnswer:
    """Start a live session: send the browser's SDP offer and the session options, get the SDP answer and the
    session's `owner_key`, which every route on the session then needs (`Authorization: Bearer KEY`). An offer
    that presents an owner key the studio issued starts another session of that visitor, with the same key."""
    visitor = visitors.visitor_for(key)
    caller = visitors.find(key)       # the admin plays any source; its sessions still get keys of their own
    visitors.require_source(caller if caller is not None else visitor, offer.source, settings.data_dir,
                            settings.takes_path)
    presenter = caller is not None and caller.admin
    client = request.client.host if request.client else None
    answer = await manager.offer(offer, visitors.grant(visitor, settings.takes, presenter), client)
    visitors.enroll(visitor)          # only now: a failing offer registers nobody
    return answer


@webrtc_api.get("/ice", response_model=BrowserIceConfiguration, response_model_exclude_none=True)
async def ice_configuration(settings: SettingsDep) -> BrowserIceConfiguration:
    """The RTCConfiguration for `new RTCPeerConnection(...)`: the studio's STUN/TURN servers (with TURN REST
    credentials minted for this request when the studio has a secret) and its transport policy."""
    return BrowserIceConfiguration.model_validate(settings.ice.for_browser())


@studio_api.get("/health", response_model=Health)
async def health(manager: ManagerDep, settings: SettingsDep, feeds: FeedsDep, visitors: VisitorsDep,
                 key: KeyDep) -> Health:
    """Anyone may ask whether the studio is up; only the admin learns its version and, with --cluster, which
    sessions each worker hosts (session ids open doors; a version tells an attacker what to try)."""
    loaded = manager.loaded_renderer(settings.renderer)     # never loads one: health must answer at once
    admin = visitors.is_admin(key)
    workers = None
    if manager.pool is not None:         # each worker with the live sessions it hosts (by the ids the API uses)
        hosted = [(s.id, s.host) for s in live_sessions(manager)] if admin else []
        workers = [{**w, **({"session_ids": [sid for sid, host in hosted if host == w["name"]]} if admin else {})}
                   for w in manager.pool.describe()]
    return Health(ready=manager.planner.warmed.is_set(),
                  text_matching_ready=matching_ready() if settings.warm_text_matching else None,
                  version=__version__ if admin else None, sessions=len(live_sessions(manager)),
                  max_sessions=settings.max_sessions,
                  renderer=settings.renderer, renderers=list(RENDERERS), feeds=feeds.names(),
                  renderer_info=loaded.describe() if loaded is not None else None,
                  workers=workers)


@studio_api.put("/osc", response_model=OscTarget, dependencies=[AdminDep], responses={401: {"model": ErrorBody}})
async def osc_target(target: OscTarget, manager: ManagerDep, settings: SettingsDep) -> OscTarget:
    """The session OSC steers from now on (the admin's: OSC carries no credentials, so it never picks a visitor's
    session by itself); null returns to the admin's newest. The presenter's page session: its id from
    GET /api/sessions."""
    if target.session_id is not None and target.session_id not in manager.sessions:
        raise HTTPException(404, f"no live session {target.session_id!r} (it may have ended)")
    settings.osc_session = target.session_id
    return target


@studio_api.get("/presets", response_model=list[str])
async def presets() -> list[str]:
    return preset_names()


def _info(s: LiveSession) -> SessionInfo:
    return SessionInfo(session_id=s.id, source=s.source_name, renderer=s.renderer_name, width=s.width,
                       height=s.height, fps=s.fps, frame=s.frame_index, frames_sent=s.track.frames_sent,
                       measured_fps=round(s.track.meter.fps, 2), state=s.state, codec=s.codec,
                       bitrate=getattr(s.encoder, "target_bitrate", None))


@sessions_api.get("", response_model=list[SessionInfo], dependencies=[AdminDep],
                  responses={401: {"model": ErrorBody}})
async def list_sessions(manager: ManagerDep) -> list[SessionInfo]:
    """Every live session, for the admin token only (anyone may read the count in /api/health)."""
    return [_info(s) for s in live_sessions(manager)]


@sessions_api.get("/{session_id}", response_model=SessionInfo, responses=NOT_FOUND)
async def get_session(session: SessionDep) -> SessionInfo:
    return _info(session)


@sessions_api.get("/{session_id}/schedule", response_model=Schedule, response_model_exclude_none=True,
              responses=NOT_FOUND)
async def get_schedule(session: SessionDep) -> Schedule:
    """The session's schedule, live prompt switches included: save it to replay the session offline."""
    return session.schedule


@sessions_api.post("/{session_id}/take", response_model=dc.TakeStatus, response_model_exclude_none=True,
               responses={**ERRORS, **NOT_FOUND})
async def take(body: TakeRequest, session: SessionDep) -> dc.TakeStatus:
    """Start or stop recording a take of the session (docs/presenting.md); answers the take's status."""
    answer = await session.control.ask(dc.build(dc.Take, action=body.action), tell_owner=True)
    if answer is None:              # a take is answered on the event loop: only a session ending meanwhile
        raise HTTPException(404, f"no live session {session.id!r} (it may have ended)")
    return dc.TakeStatus.model_validate(answer.model_dump(include=set(dc.TakeStatus.model_fields)))


@sessions_api.delete("/{session_id}", status_code=204, response_class=Response, responses=NOT_FOUND)
async def end_session(session: SessionDep, manager: ManagerDep) -> None:
    await manager.end(session, "ended over the API")


@pages.get("/metrics", response_class=PlainTextResponse, dependencies=[ScraperDep])
async def metrics(metrics: MetricsDep) -> Response:
    """Prometheus exposition format (prometheus_client)."""
    return Response(metrics.exposition(), media_type=CONTENT_TYPE)


@pages.get("/webrtc/ice.js", response_class=Response, include_in_schema=False)
async def ice_script() -> Response:
    """The page's ICE helper (fetches /api/webrtc/ice)."""
    return Response(files("studio.server").joinpath("ice.js").read_text(), media_type="text/javascript",
                    headers={"Cache-Control": "no-cache"})


@pages.get("/player", response_class=HTMLResponse, include_in_schema=False)
async def player() -> str:
    return files("studio.server").joinpath("player.html").read_text()
