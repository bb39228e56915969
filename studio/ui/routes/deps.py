"""What the UI's routes share: the UI's own state (`UIDep`, on `app.state.ui`) and the error responses they
document. What a route needs from the live server (a session, the manager, the settings, the visitor) comes from
studio.server.deps."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

from fastapi import Depends
from starlette.requests import HTTPConnection

from studio.server.models import ErrorBody, Responses
from studio.ui.jobs import RenderJobs
from studio.ui.thumbnails import ThumbnailCache

ERRORS: Responses = {400: {"model": ErrorBody}, 401: {"model": ErrorBody}, 404: {"model": ErrorBody},
                     422: {"model": ErrorBody}}
BUSY: Responses = {409: {"model": ErrorBody}}
PNG: Responses = {200: {"content": {"image/png": {}}, "description": "a PNG image"}}
DEFAULT_UPLOAD_LIMIT = 256 * 2**20


@dataclass
class UIState:
    """What the UI routes keep, on `app.state.ui`."""

    thumbnails: ThumbnailCache
    jobs: RenderJobs
    data_dir: Path                  # the server's data dir: recorded sequences and uploads/
    upload_limit: int = DEFAULT_UPLOAD_LIMIT


def ui_state(conn: HTTPConnection) -> UIState:
    return conn.app.state.ui


UIDep = Annotated[UIState, Depends(ui_state)]
