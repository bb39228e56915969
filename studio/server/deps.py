"""What routes need from the app, as FastAPI dependencies: the one module that reads `app.state`.

A route names what it needs in its signature (`session: SessionDep`, `manager: ManagerDep`, ...) and FastAPI
hands it over, so no route reaches into the app's state, and /docs shows the path parameter a provider reads.
`live_session` is the one place a route gets a session, and the one place its owner's key is checked (issue 26):
a route added later that names `SessionDep` is owner-only without further code. The watch routes (WHEP, the watch
page) get theirs from `watched_session`, which admits a watch key as well. Refusals are one 401 line, the same
whether or not the session exists, so ids cannot be probed.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, HTTPException
from starlette.requests import HTTPConnection

from gbuffer.feed import FeedHub
from studio.server import access
from studio.server.access import Visitor, Visitors
from studio.server.goodbye import Goodbyes
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


def feed_goodbyes(conn: HTTPConnection) -> Goodbyes:
    return conn.app.state.goodbyes


def studio_metrics(conn: HTTPConnection) -> StudioMetrics:
    return conn.app.state.metrics


def studio_visitors(conn: HTTPConnection) -> Visitors:
    return conn.app.state.visitors


def presented_key(conn: HTTPConnection) -> str | None:
    """The `Authorization: Bearer KEY` of the request (never a query parameter: URLs end up in logs)."""
    return access.bearer(conn.headers.get("authorization"))


ManagerDep = Annotated[SessionManager, Depends(session_manager)]
SettingsDep = Annotated[Settings, Depends(studio_settings)]
FeedsDep = Annotated[FeedHub, Depends(feed_hub)]
GoodbyesDep = Annotated[Goodbyes, Depends(feed_goodbyes)]
MetricsDep = Annotated[StudioMetrics, Depends(studio_metrics)]
VisitorsDep = Annotated[Visitors, Depends(studio_visitors)]
KeyDep = Annotated[str | None, Depends(presented_key)]
BEARER = {"WWW-Authenticate": 'Bearer realm="alaya-studio"'}


def live_sessions(manager: SessionManager) -> list[LiveSession]:
    """The live sessions now (a copy: sessions end while a route reads them)."""
    return list(manager.sessions.values())


def _refuse(detail: str = access.REFUSED) -> HTTPException:
    return HTTPException(401, detail, headers=BEARER)


def _present(session: LiveSession | None, session_id: str) -> LiveSession:
    if session is None or session.state == "closed":
        raise HTTPException(404, f"no live session {session_id!r} (it may have ended)")
    return session


def live_session(session_id: str, manager: ManagerDep, visitors: VisitorsDep, key: KeyDep) -> LiveSession:
    """The session a route's `{session_id}` names, for its owner (the key from its offer) or the admin; 401 for
    anyone else, before anything says whether the session exists; then 404 when it has just ended."""
    session = manager.sessions.get(session_id)
    if not visitors.may_act(key, session.owner_key if session is not None else None):
        raise _refuse()
    return _present(session, session_id)


def watched_session(session_id: str, manager: ManagerDep, settings: SettingsDep, visitors: VisitorsDep,
                    key: KeyDep, conn: HTTPConnection) -> LiveSession:
    """A session for its audience: its watch key (a Bearer header, or `?key=` on a watch link, which is what the
    owner shares), the owner's key or the admin token; else the same 401. Only the watch key travels in a URL
    (URLs end up in logs and histories), and the engines' feed token opens no session (issue 42: with ids read
    from /metrics it opened every session's watch routes)."""
    session = manager.sessions.get(session_id)
    watch_key = key or conn.query_params.get("key")
    admitted = session is not None and (session.audience.admits(watch_key)
                                        or access.same_key(key, session.owner_key))
    if not (admitted or visitors.is_admin(key)):
        raise _refuse("a watch key is required: Authorization: Bearer KEY (the key the session's owner shares) "
                      "or ?key=KEY on a watch link; this one is missing or wrong")
    return _present(session, session_id)


def admin(visitors: VisitorsDep, key: KeyDep) -> None:
    if not visitors.is_admin(key):
        raise _refuse(access.ADMIN_ONLY)


def scraper(visitors: VisitorsDep, settings: SettingsDep, key: KeyDep) -> None:
    """/metrics names every live session: the admin token, or the scraper's own `metrics_token`."""
    if not (visitors.is_admin(key) or access.same_key(key, settings.metrics_token)):
        raise _refuse("/metrics needs the admin token or the metrics token: Authorization: Bearer TOKEN")


def visitor(visitors: VisitorsDep, key: KeyDep) -> Visitor:
    """Whoever presents an owner key the studio issued (or the admin token): uploads and render jobs."""
    found = visitors.find(key)
    if found is None:
        raise _refuse(access.VISITOR_ONLY)
    return found


SessionDep = Annotated[LiveSession, Depends(live_session)]
WatchedDep = Annotated[LiveSession, Depends(watched_session)]
AdminDep = Depends(admin)                     # for `dependencies=[AdminDep]`: the route needs no value
ScraperDep = Depends(scraper)
VisitorDep = Annotated[Visitor, Depends(visitor)]
