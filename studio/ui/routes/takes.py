"""Finished takes as the page meets them: a take's schedule as played (what the timeline shows when the take is
the source) and removing one of the visitor's takes. Recording a take is the live server's
(`/api/sessions/{id}/take`)."""

from __future__ import annotations

import shutil

from fastapi import APIRouter, HTTPException
from fastapi.responses import Response

from alaya_errors import UserError
from studio.server.deps import KeyDep, SettingsDep, VisitorDep, VisitorsDep
from studio.takes import TAKE_PREFIX
from timeline.schedule import Schedule

router = APIRouter()


@router.get("/takes/{take_id}/schedule", response_model=Schedule, response_model_exclude_none=True)
def take_schedule(take_id: str, settings: SettingsDep, visitors: VisitorsDep, key: KeyDep) -> Schedule:
    """A take's schedule as played: what the timeline shows when the take is picked as the source."""
    visitors.require_source(visitors.find(key), TAKE_PREFIX + take_id, None, settings.takes_path)
    return settings.takes.open(take_id).schedule


@router.delete("/takes/{take_id}", status_code=204, response_class=Response)
def delete_take(take_id: str, settings: SettingsDep, visitor: VisitorDep) -> None:
    """Remove one of the visitor's finished takes; the admin token removes any."""
    try:
        folder = settings.takes.open(take_id).folder
    except UserError:
        folder = None
    if folder is None or not visitor.owns(folder):
        raise HTTPException(404, f"you hold no finished take {take_id!r}")
    shutil.rmtree(folder)
