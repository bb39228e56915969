"""The app's API routes as tests walk them (FastAPI keeps included routers nested)."""

from __future__ import annotations

from fastapi.routing import APIRoute


def api_routes(router, prefix: str = "") -> list[tuple[str, APIRoute]]:
    """(full path, route) of every API route on the app, through included routers."""
    out = []
    for route in router.routes:
        if isinstance(route, APIRoute):
            out.append((prefix + route.path, route))
        elif hasattr(route, "original_router"):
            out += api_routes(route.original_router, prefix + route.include_context.prefix)
    return out
