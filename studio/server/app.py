"""The FastAPI app factory. The Gradio UI mounts onto the same app later (`gr.mount_gradio_app(app, ...)`)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping
from pathlib import Path

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, RedirectResponse
from starlette.exceptions import HTTPException

from alaya_errors import UserError, describe_error, location
from gbuffer.feed import FeedHub, FeedLimits
from prompt_presets import matching
from studio import __version__
from studio.server import feed_routes, ice, routes, whep_routes
from studio.server.access import QuotaFull, Visitors
from studio.server.allocator import limit_arenas
from studio.server.audience import AudienceFull
from studio.server.body_limit import BodyLimit
from studio.server.goodbye import Goodbyes
from studio.server.metrics import StudioMetrics
from studio.server.offline_docs import mount_offline_docs
from studio.server.osc import start_osc
from studio.server.owners import INDEX_NAME, Folders
from studio.server.redact import hide_paths
from studio.server.sessions import PendingOffers, SessionManager, StudioFull
from studio.server.settings import Settings


def create_app(settings: Settings | None = None, *, player_at_root: bool = True, pool=None) -> FastAPI:
    """The studio's HTTP app: REST API under /api, engine feed WebSocket, /metrics, /docs and a player page.

    `player_at_root=False` leaves `/` free for the UI that mounts itself there. `pool`: render workers already
    started (cluster.pool.WorkerPool; `serve --cluster` starts them first, so a bad address is one line);
    else `settings.cluster` starts them with the app."""
    settings = settings or Settings()
    limit_arenas()   # what a session frees serves the next one's frames, in two shared heaps (issue 29)

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI):
        app.state.loop = asyncio.get_running_loop()  # for code on other threads (and tests) that must reach it
        if pool is not None:            # render workers first: the default renderer is theirs
            app.state.sessions.pool = pool
        elif settings.cluster:
            # a pooled thread, not one of its own: Ray's head processes die with the thread that started
            # them (PR_SET_PDEATHSIG follows the thread), and the executor's threads live as long as the loop
            app.state.sessions.pool = await asyncio.get_running_loop().run_in_executor(None, start_pool, settings)
        # The default session's one-off costs while nobody waits for them; /api/health says `ready` after.
        warm = asyncio.get_running_loop().run_in_executor(None, app.state.sessions.planner.warm_up)
        osc = await start_osc(settings, app.state.sessions, app.state.metrics) if settings.osc_port else None
        if settings.warm_text_matching:     # in a child process at low CPU priority (prompt_presets/minilm.py)
            matching.warm_up_in_background()
        yield
        if osc is not None:
            osc.close()
        await app.state.sessions.close_all()
        await warm
        if app.state.sessions.pool is not None:
            await asyncio.get_running_loop().run_in_executor(None, app.state.sessions.pool.close)

    app = FastAPI(title="AlayaStudio", version=__version__, lifespan=lifespan, docs_url=None, redoc_url=None,
                  description="Real-time generative world rendering: live sessions over WebRTC, engine feeds.")
    app.state.settings = settings
    app.state.goodbyes = Goodbyes()   # the feeds' close with a reason, said before uvicorn's shutdown
    app.state.feeds = FeedHub(FeedLimits(settings.feed_max_pixels, settings.feed_max_fps))
    app.state.sessions = SessionManager(settings, app.state.feeds)
    app.state.metrics = StudioMetrics(app.state.sessions, app.state.feeds, settings)
    app.state.sessions.observer = app.state.metrics.observer
    app.state.visitors = Visitors(settings.admin_token, settings.disk, lambda: _visitor_folders(settings))
    for router in (*routes.routers, feed_routes.router, *whep_routes.routers):
        app.include_router(router)
    # issue 42, finding 8: offer and WHEP bodies judged by their size before they are read
    app.add_middleware(BodyLimit)
    mount_offline_docs(app)
    if player_at_root:
        app.add_api_route("/", lambda: RedirectResponse("/player"), include_in_schema=False)

    def error(message: str, where: str | None, status: int, headers: Mapping[str, str] | None = None) -> JSONResponse:
        """Every error answer: one line, and no server path in it (redact.py)."""
        return JSONResponse({"error": hide_paths(message, settings), "where": hide_paths(where, settings)},
                            status_code=status, headers=headers)

    @app.exception_handler(UserError)
    async def _user_error(request: Request, exc: UserError) -> JSONResponse:
        return error(str(exc), exc.where, 400)

    @app.exception_handler(QuotaFull)
    async def _quota_full(request: Request, exc: QuotaFull) -> JSONResponse:
        return error(str(exc), exc.where, exc.status, {"Retry-After": "60"} if exc.status == 507 else None)

    @app.exception_handler(StudioFull)
    async def _full(request: Request, exc: StudioFull) -> JSONResponse:
        return JSONResponse({"error": str(exc), "where": None}, status_code=503, headers={"Retry-After": "10"})

    @app.exception_handler(PendingOffers)
    async def _pending_offers(request: Request, exc: PendingOffers) -> JSONResponse:
        return JSONResponse({"error": str(exc), "where": None}, status_code=429, headers={"Retry-After": "10"})

    @app.exception_handler(AudienceFull)
    async def _audience_full(request: Request, exc: AudienceFull) -> JSONResponse:
        return JSONResponse({"error": str(exc), "where": "watchers"}, status_code=503, headers={"Retry-After": "10"})

    @app.exception_handler(ice.IceFailed)
    async def _ice_failed(request: Request, exc: ice.IceFailed) -> JSONResponse:
        return JSONResponse({"error": str(exc), "where": "ice"}, status_code=502)

    @app.exception_handler(HTTPException)
    async def _http(request: Request, exc: HTTPException) -> JSONResponse:
        return error(str(exc.detail), None, exc.status_code, exc.headers)

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        err = exc.errors()[0]
        where = location(tuple(p for p in err["loc"] if p != "body")) or "body"
        message = describe_error(err, skip=("body",))
        return JSONResponse({"error": message if message.startswith(where) else f"{where}: {message}",
                             "where": where}, status_code=422)

    return app


def _visitor_folders(settings: Settings) -> Folders:
    """Visitors' uploads and takes (what the disk quota counts) and who owns them (the data dir may be set later)."""
    if settings.data_dir is None:        # no data dir (a bare app, no UI): ownership lasts this run only
        return Folders(None, settings.takes_path, None)
    return Folders(settings.uploads_path, settings.takes_path, Path(settings.data_dir) / INDEX_NAME)


def start_pool(settings: Settings):
    """Start or join Ray and the render workers (cluster/, the optional `cluster` extra)."""
    from cluster.pool import PoolSettings, WorkerPool

    if settings.cluster is None:
        raise ValueError("the render workers need settings.cluster (local, auto or ray://HOST:PORT)")
    return WorkerPool(PoolSettings(settings.cluster, settings.workers, settings.worker_sessions, settings.renderer,
                                   settings.renderer_options, settings.batch_wait_ms, settings.max_batch,
                                   settings.cluster_cpus)).start()
