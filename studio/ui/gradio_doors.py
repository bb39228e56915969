"""The doors of the Gradio mount that stay open (issue 42, finding 4).

Gradio serves more than the studio page needs: `gradio_api/upload` stored any stranger's file outside the studio's
quota and answered with its absolute server path, and `gradio_api/file=` served it back to anyone. The page is
static HTML driven by the studio's own scripts (static/*.js, the /api routes), so it needs only Gradio's page, its
built assets, its static files, its theme and its config. Everything else under the mount gets a one-line 404, and
the config loses Gradio's version (it tells an attacker which advisories apply).

The list below is what Chromium fetched loading the page and starting a session; a Gradio upgrade that fetches
something new shows up as a 404 in tests/test_ui_browser.py.
"""

from __future__ import annotations

import json

OPEN_PREFIXES = ("/assets/", "/static/")
STUDIO_OWN = ("/watch/",)      # the studio's own routes under the prefix (the watch page), not Gradio's
OPEN_PATHS = ("", "/", "/theme.css", "/config", "/favicon.ico")
NOT_FOUND = json.dumps({"error": "not found", "where": None}).encode()


class GradioDoors:
    """ASGI middleware: under `prefix`, only GET/HEAD of the page's own files reach Gradio."""

    def __init__(self, app, prefix: str):
        self.app, self.prefix = app, prefix.rstrip("/")

    async def __call__(self, scope, receive, send):
        path = scope.get("path", "")
        if scope["type"] != "http" or not (path == self.prefix or path.startswith(self.prefix + "/")):
            return await self.app(scope, receive, send)
        rest = path[len(self.prefix):]
        if rest.startswith(STUDIO_OWN):
            return await self.app(scope, receive, send)
        if scope["method"] not in ("GET", "HEAD") or not (rest in OPEN_PATHS or rest.startswith(OPEN_PREFIXES)):
            return await refuse(send)
        if rest == "/config":
            return await self.app(scope, receive, without_version(send))
        return await self.app(scope, receive, send)


async def refuse(send) -> None:
    await send({"type": "http.response.start", "status": 404,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(NOT_FOUND)).encode())]})
    await send({"type": "http.response.body", "body": NOT_FOUND})


def without_version(send):
    """`send` for Gradio's config answer: the body gathered (a few KB), its `version` dropped, the length fixed."""
    start: dict = {}
    body = bytearray()

    async def filtered(message):
        if message["type"] == "http.response.start":
            start.update(message)
            return
        body.extend(message.get("body", b""))
        if message.get("more_body"):
            return
        data = bytes(body)
        try:
            config = json.loads(data)
            config.pop("version", None)
            data = json.dumps(config).encode()
        except ValueError:
            pass                             # not JSON (an error page): passed on as it came
        headers = [(k, v) for k, v in start.get("headers", []) if k.lower() != b"content-length"]
        await send({**start, "headers": headers + [(b"content-length", str(len(data)).encode())]})
        await send({"type": "http.response.body", "body": data})

    return filtered
