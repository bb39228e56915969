"""Render-to-MP4 jobs: start one from the timeline's schedule and a live session's options, follow its progress,
download the MP4. A job and its MP4 answer only to the owner key that started it (and the admin token); the
rendering itself, and the queue jobs wait in for their turn, is studio/ui/jobs.py."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, HTTPException
from fastapi.responses import FileResponse
from pydantic import BaseModel, Field

from studio.server.deps import ManagerDep, VisitorDep, VisitorsDep
from studio.server.models import ErrorBody, SessionOptions
from studio.sources import ENGINE_INPUTS
from studio.ui.jobs import RenderJob, RenderJobs
from studio.ui.routes.deps import BUSY, UIDep

router = APIRouter()


class RenderRequest(SessionOptions):
    """A live session's options plus how many frames to render; the built-in engine runs on autopilot."""

    schedule: dict[str, Any] = Field(description="schedule JSON, as exported by the timeline editor")
    frames: int | None = Field(None, ge=1, description="default: the schedule's length")


class RenderJobInfo(BaseModel):
    id: str
    state: str = Field(description="waiting (its turn has not come), running, then done or failed")
    position: int | None = Field(description="while waiting, its place in the queue: 1 = it renders next")
    frames: int
    done: int = Field(description="frames rendered so far")
    progress: float = Field(description="done / frames, 0..1")
    error: str | None
    download: str | None = Field(description="the MP4's URL once done")
    fps: float | None = Field(description="render speed, frames per second")

    @classmethod
    def of(cls, job: RenderJob, jobs: RenderJobs) -> RenderJobInfo:
        return cls(id=job.id, state=job.state, position=jobs.position(job), frames=job.frames, done=job.done,
                   progress=round(job.done / job.frames, 4) if job.frames else 0.0, error=job.error,
                   download=f"/api/ui/renders/{job.id}/video.mp4" if job.state == "done" else None,
                   fps=job.metrics.get("fps"))


@router.post("/renders", response_model=RenderJobInfo, responses={429: {"model": ErrorBody}})
def start_render(body: RenderRequest, manager: ManagerDep, ui: UIDep, visitor: VisitorDep,
                 visitors: VisitorsDep) -> RenderJobInfo:
    """Render the timeline offline as a live session of the same options would (size, renderer, seed, and
    the server's limits on them); the built-in engine runs on autopilot. The job and its MP4 answer only to
    the owner key that started it (and the admin token). While another job renders it waits its turn (429 when
    the queue is full, or this visitor has a job waiting or rendering already)."""
    if body.source in ENGINE_INPUTS:
        body = body.model_copy(update={"source": "demo"})
    visitors.require_source(visitor, body.source, ui.data_dir, manager.settings.takes_path)
    plan = manager.plan(body)
    source = manager.open_source(plan, "render")     # a bad source is a 400 now, not a failed job later
    try:
        renderer = manager.renderer(plan.renderer)
        job = ui.jobs.start(body.frames, source, renderer, plan, owner=visitor)
    except BaseException:
        source.close()
        raise
    return RenderJobInfo.of(job, ui.jobs)


def render_job(job_id: str, ui: UIDep, visitor: VisitorDep) -> RenderJob:
    """The job, for the visitor who started it or the admin; one 404 for a job that is gone or not yours."""
    job = ui.jobs.get(job_id)
    if job is None or not (visitor.admin or job.owner is visitor):
        raise HTTPException(404, f"you have no render job {job_id!r}")
    return job


RenderJobDep = Annotated[RenderJob, Depends(render_job)]


@router.get("/renders/{job_id}", response_model=RenderJobInfo)
def render_status(job: RenderJobDep, ui: UIDep) -> RenderJobInfo:
    return RenderJobInfo.of(job, ui.jobs)


@router.get("/renders/{job_id}/video.mp4", response_class=FileResponse,
            responses={200: {"content": {"video/mp4": {}}, "description": "the rendered MP4"}, **BUSY})
def render_video(job: RenderJobDep) -> FileResponse:
    if job.state != "done":
        raise HTTPException(409, f"render {job.id} is {job.state}")
    return FileResponse(job.path, media_type="video/mp4", filename=f"alaya-{job.id}.mp4")
