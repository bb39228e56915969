"""The studio UI: a Gradio Blocks page mounted on the live server's FastAPI app (same origin, one process),
plus the REST routes it needs (`routes/`, one module per concern) and its static scripts. See docs/ui.md.

    app = create_app(settings, player_at_root=False)
    mount_ui(app)            # the studio at /studio, / redirects there
"""

from __future__ import annotations

import tempfile
from importlib.resources import files
from pathlib import Path

from fastapi import FastAPI, Request
from fastapi.responses import RedirectResponse
from fastapi.staticfiles import StaticFiles

UI_PATH = "/studio"
CACHE_DIR = Path.home() / ".cache" / "alaya-studio"


def mount_ui(app: FastAPI, *, path: str = UI_PATH, cache_dir: str | Path | None = None,
             upload_limit: int | None = None, prewarm_thumbnails: bool = True) -> FastAPI:
    """Mount the studio page at `path` on `app` (built by `studio.server.create_app`) and redirect `/` to it.

    `cache_dir` keeps preset thumbnails and rendered MP4s (default ~/.cache/alaya-studio). Uploads go to the
    server's data dir under uploads/; a server started without one gets a temporary data dir, so uploads
    still play. `upload_limit` is in bytes (default 256 MiB). `prewarm_thumbnails` renders the gallery's
    missing thumbnails in a background thread now instead of on the first visitor's requests."""
    import gradio as gr

    from studio.ui import routes
    from studio.ui.blocks import STATIC_URL, build_blocks, head_html, page_theme
    from studio.ui.jobs import RenderJobs
    from studio.ui.routes.deps import DEFAULT_UPLOAD_LIMIT, UIState
    from studio.ui.thumbnails import ThumbnailCache

    settings = app.state.settings
    if settings.data_dir is None:
        settings.data_dir = Path(tempfile.mkdtemp(prefix="alaya-data-"))
    cache = Path(cache_dir) if cache_dir is not None else CACHE_DIR
    from studio.server.redact import hide_paths

    jobs = RenderJobs(cache / "renders", lambda text: hide_paths(text, settings))
    app.state.ui = UIState(thumbnails=ThumbnailCache(cache / "thumbnails"), jobs=jobs,
                           data_dir=Path(settings.data_dir).resolve(),
                           upload_limit=upload_limit or DEFAULT_UPLOAD_LIMIT)
    if prewarm_thumbnails:
        app.state.ui.thumbnails.prewarm()
    app.include_router(routes.router)
    app.mount(STATIC_URL, StaticFiles(directory=str(files("studio.ui").joinpath("static"))), name="ui-static")
    # `/` belongs to the studio page (the server's bare player stays at /player)
    app.router.routes = [r for r in app.router.routes if getattr(r, "path", None) != "/"]

    def to_studio(request: Request) -> RedirectResponse:       # keeps ?size=... and ?source=...
        query = request.url.query
        return RedirectResponse(f"{path}/" + (f"?{query}" if query else ""))

    app.add_api_route("/", to_studio, include_in_schema=False)
    from studio.ui.gradio_doors import GradioDoors

    app.add_middleware(GradioDoors, prefix=path)      # only the page's own files reach Gradio (issue 42)
    return gr.mount_gradio_app(app, build_blocks(), path=path, head=head_html(), theme=page_theme(),
                               footer_links=[], show_error=True)
