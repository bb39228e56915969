"""Which web pages may open the engine feed's WebSocket (issue 42, finding 5).

A browser lets any page open a WebSocket to any address, the studio's loopback port included, and sends the page's
`Origin` with it; an engine (a game, a script, gRPC's bridge) sends none. So a request with no Origin is an engine,
and one with an Origin is a page, welcome only when it is the studio's own page or one the operator listed with
`--allowed-origin`.

"The studio's own" is judged by name, not by the Host header: with DNS rebinding, evil.example resolves to
127.0.0.1, and its page's Origin and Host both say evil.example, so comparing the two would let it in. The
studio's own names are the loopback ones and the `--host` it listens on, on the port the request came to.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from studio.server.settings import is_loopback


def origin_allowed(origin: str | None, host_header: str | None, settings) -> bool:
    """True for an engine (no Origin), the studio's own pages, and the operator's `allowed_origins`."""
    if origin is None:
        return True
    if origin.rstrip("/") in settings.allowed_origins:
        return True
    try:
        page = urlsplit(origin)
        port = page.port or (443 if page.scheme == "https" else 80)
        request_port = urlsplit(f"//{host_header}").port if host_header else None
    except ValueError:                     # a malformed Origin or Host: nobody's page
        return False
    name = page.hostname or ""
    own = is_loopback(name) or (name == settings.host and not is_wildcard(settings.host))
    return own and page.scheme in ("http", "https") and port == (request_port or settings.port)


def is_wildcard(host: str) -> bool:
    return host in ("0.0.0.0", "::", "")
