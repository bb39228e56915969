"""The G-buffer inspector of a live session: its newest rendered frame as a labelled PNG grid (output and the five
input channels), and that frame's index, prompt and source metadata. Owner-only, like the session's other
routes: the owner key or the admin token (studio.server.deps.SessionDep)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, HTTPException
from fastapi.responses import Response

from studio.server.deps import SessionDep
from studio.ui import inspector
from studio.ui.inspector import InspectorInfo
from studio.ui.routes.deps import BUSY, PNG
from timeline.rollout import RenderedFrame

router = APIRouter()
INSPECTOR_WAIT_S = 3.0              # how long a request waits for a session's first rendered frame


def latest_frame(session: SessionDep) -> RenderedFrame:
    """The session's newest rendered frame (blocking: FastAPI runs it on a worker thread)."""
    frame = inspector.wait_latest(session, INSPECTOR_WAIT_S)
    if frame is None:
        raise HTTPException(409, f"no frame rendered within {INSPECTOR_WAIT_S:g} s (paused?); ask again")
    return frame


LatestFrameDep = Annotated[RenderedFrame, Depends(latest_frame)]


@router.get("/sessions/{session_id}/inspector", response_model=InspectorInfo, responses=BUSY)
def inspector_json(frame: LatestFrameDep) -> InspectorInfo:
    return inspector.inspector_info(frame)


@router.get("/sessions/{session_id}/inspector.png", response_class=Response, responses={**PNG, **BUSY})
def inspector_image(frame: LatestFrameDep) -> Response:
    return Response(inspector.inspector_png(frame), media_type="image/png",
                    headers={"X-Alaya-Frame": str(frame.index), "Cache-Control": "no-store"})
