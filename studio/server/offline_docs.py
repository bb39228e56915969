"""/docs and the favicon without internet: FastAPI's Swagger page fetches its script and style from a CDN, which
leaves a presenter at a venue with no network a blank page. Here the assets (Swagger UI 5, which reads the
OpenAPI 3.1 that FastAPI writes) come from the `fastapi-offline` package's static folder, served by FastAPI's
documented self-hosting recipe; the favicon is this package's."""

from __future__ import annotations

from importlib.resources import files

from fastapi import FastAPI
from fastapi.openapi.docs import get_swagger_ui_html, get_swagger_ui_oauth2_redirect_html
from fastapi.responses import HTMLResponse, Response
from fastapi.staticfiles import StaticFiles

DOCS_ASSETS = "/docs-assets"
FAVICON = "/favicon.ico"           # an SVG; every page links it, and browsers ask for this path by default


def favicon_svg() -> bytes:
    return files("studio.server").joinpath("favicon.svg").read_bytes()


def mount_offline_docs(app: FastAPI, docs_url: str = "/docs") -> None:
    """Serve the Swagger page at `docs_url` with self-hosted assets (the app is built with docs_url=None)."""
    app.mount(DOCS_ASSETS, StaticFiles(directory=str(files("fastapi_offline").joinpath("static"))),
              name="docs-assets")
    redirect_url = f"{docs_url}/oauth2-redirect"

    def docs() -> HTMLResponse:
        assert app.openapi_url is not None, "the docs page needs the app's OpenAPI schema"
        return get_swagger_ui_html(openapi_url=app.openapi_url, title=f"{app.title} API",
                                   swagger_js_url=f"{DOCS_ASSETS}/swagger-ui-bundle.js",
                                   swagger_css_url=f"{DOCS_ASSETS}/swagger-ui.css", swagger_favicon_url=FAVICON,
                                   oauth2_redirect_url=redirect_url)

    app.add_api_route(docs_url, docs, include_in_schema=False)
    app.add_api_route(redirect_url, get_swagger_ui_oauth2_redirect_html, include_in_schema=False)
    app.add_api_route(FAVICON, lambda: Response(favicon_svg(), media_type="image/svg+xml",
                                                headers={"Cache-Control": "max-age=86400"}),
                      include_in_schema=False)
