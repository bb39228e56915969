"""What routes need from the app, as FastAPI dependencies: the one module that reads `app.state`.

A route names what it needs in its signature (`session: SessionDep`, `manager: ManagerDep`, ...) and FastAPI
hands it over, so no route reaches into the app's state, and /docs shows the path parameter a provider reads.
`live_session` is the one place a route gets a session (the session routes, the inspector, WHEP and the watch
page): a check that every session route needs (the owner's key, issue 26) belongs there, letting through the
watch routes, which admit a watch key instead (whep_routes.py).
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, HTTPException
from starlette.requests import HTTPConnection

from gbuffer.feed import FeedHub
from studio.server.metrics import StudioMetrics
from studio.server.session import LiveSession
from studio.server.sessions import SessionManager
from studio.server.settings import Settings


def session_manager(conn: HTTPConnection) -> SessionManager:
    return conn.app.state.sessions


def studio_settings(conn: HTTPConnection) -> Settings:
    return conn.app.state.settings


def feed_hub(conn: HTTPConnection) -> FeedHub:
    return conn.app.state.feeds


def studio_metrics(conn: HTTPConnection) -> StudioMetrics:
    return conn.app.state.metrics


ManagerDep = Annotated[SessionManager, Depends(session_manager)]
SettingsDep = Annotated[Settings, Depends(studio_settings)]
FeedsDep = Annotated[FeedHub, Depends(feed_hub)]
MetricsDep = Annotated[StudioMetrics, Depends(studio_metrics)]


def live_sessions(manager: SessionManager) -> list[LiveSession]:
    """The live sessions now (a copy: sessions end while a route reads them)."""
    return list(manager.sessions.values())


def live_session(session_id: str, manager: ManagerDep) -> LiveSession:
    """The session a route's `{session_id}` names; 404 when there is none, or it has just ended."""
    session = manager.sessions.get(session_id)
    if session is None or session.state == "closed":
        raise HTTPException(404, f"no live session {session_id!r} (it may have ended)")
    return session


SessionDep = Annotated[LiveSession, Depends(live_session)]
