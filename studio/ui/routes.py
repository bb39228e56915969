"""REST routes the studio page needs beyond the live server's own (/api/ui/...): the preset gallery with
thumbnails, the source picker and uploads, schedule import/validation for the timeline editor, the G-buffer
inspector and render-to-MP4 jobs. Live-session objects are reached through the server's SessionManager."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from fastapi import APIRouter, HTTPException, Query, Request
from fastapi.responses import FileResponse, Response
from pydantic import BaseModel, Field

from gbuffer.formats.sequence import input_kind
from gbuffer.frame import GBufferError
from prompt_presets import Conditioning, load_presets, resolve_prompt
from studio.schedule import FORMATS, Schedule, builtin_names, load_builtin, parse_schedule_text
from studio.schedule.easing import EASINGS
from studio.server.models import ErrorBody, SessionOptions
from studio.sources import ENGINE_INPUTS
from studio.takes import TAKE_PREFIX
from studio.ui import inspector
from studio.ui.jobs import RenderJob, RenderJobs
from studio.ui.thumbnails import ThumbnailCache
from studio.ui.uploads import UPLOAD_FOLDER, UploadError, save_upload

router = APIRouter(prefix="/api/ui", tags=["studio ui"])
ERRORS = {400: {"model": ErrorBody}, 404: {"model": ErrorBody}, 422: {"model": ErrorBody}}
DEFAULT_UPLOAD_LIMIT = 256 * 2**20
RAMP_SAMPLES = 16                   # points per easing curve the timeline draws
INSPECTOR_WAIT_S = 3.0              # the first request installs the frame tap, then waits for the next chunk


@dataclass
class UIState:
    """What the UI routes keep, on `app.state.ui`."""

    thumbnails: ThumbnailCache
    jobs: RenderJobs
    data_dir: Path                  # the server's data dir: recorded sequences and uploads/
    upload_limit: int = DEFAULT_UPLOAD_LIMIT


def _ui(request: Request) -> UIState:
    return request.app.state.ui


# ---- preset gallery ---------------------------------------------------------------------------------------

class PresetTile(BaseModel):
    name: str
    title: str
    color: str
    family: str
    thumbnail: str


@router.get("/presets", response_model=list[PresetTile])
def presets() -> list[PresetTile]:
    return [PresetTile(name=p.name, title=p.title, color=p.color, family=p.family,
                       thumbnail=f"/api/ui/presets/{p.name}/thumbnail.png") for p in load_presets().values()]


@router.get("/presets/{name}/thumbnail.png", response_class=Response, responses=ERRORS)
def thumbnail(name: str, request: Request) -> Response:
    """Rendered by the reference renderer from a real engine frame; cached on disk after the first request."""
    png = _ui(request).thumbnails.png(name)
    return Response(png, media_type="image/png", headers={"Cache-Control": "max-age=86400"})


# ---- sources and uploads --------------------------------------------------------------------------------

class SourceChoice(BaseModel):
    id: str = Field(description="what an offer's `source` takes")
    title: str
    kind: Literal["engine", "recorded", "feed", "take"]


def recorded_sequences(data_dir: Path) -> list[str]:
    """Sequences in the data dir and its uploads/ folder, as paths relative to it."""
    found = []
    for folder in (data_dir, data_dir / UPLOAD_FOLDER):
        if not folder.is_dir():
            continue
        for p in sorted(folder.iterdir()):
            if p.name.startswith(".") or p.name == UPLOAD_FOLDER:
                continue
            try:
                input_kind(p)
            except GBufferError:
                continue
            found.append(p.relative_to(data_dir).as_posix())
    return found


@router.get("/sources", response_model=list[SourceChoice])
def sources(request: Request) -> list[SourceChoice]:
    out = [SourceChoice(id="engine", title="Built-in kart engine (click the video to drive)", kind="engine")]
    out += [SourceChoice(id=name, title=name, kind="recorded") for name in recorded_sequences(_ui(request).data_dir)]
    out += [SourceChoice(id=f"feed:{f.name}", title=f"External engine {f.name} ({f.hello.width}x{f.hello.height})",
                         kind="feed") for f in request.app.state.feeds.feeds()]
    out += [SourceChoice(id=TAKE_PREFIX + t.id, title=t.title, kind="take")
            for t in request.app.state.settings.takes.finished()]
    return out


@router.get("/takes/{take_id}/schedule", responses=ERRORS)
def take_schedule(take_id: str, request: Request) -> dict:
    """A take's schedule as played: what the timeline shows when the take is picked as the source."""
    return request.app.state.settings.takes.open(take_id).schedule.to_json()


class UploadResult(BaseModel):
    source: str = Field(description="pass as the offer's `source` to play it")
    frames: int
    width: int
    height: int
    fps: float


@router.put("/uploads/{name}", response_model=UploadResult, responses=ERRORS)
async def upload(name: str, request: Request) -> UploadResult:
    """The request body is the file (.npy window or .gbuf.zip); it is checked by opening it as a sequence."""
    ui = _ui(request)
    declared = int(request.headers.get("content-length") or 0)
    if declared > ui.upload_limit:
        raise UploadError(f"larger than the upload limit of {ui.upload_limit / 2**20:.1f} MiB", name)
    path, info = await save_upload(request.stream(), ui.data_dir, name, ui.upload_limit)
    return UploadResult(source=path.relative_to(ui.data_dir).as_posix(), **info)


# ---- prompts ----------------------------------------------------------------------------------------------

class PromptMeaning(BaseModel):
    text: str
    preset: str | None = Field(description="the preset the text names (its name or an alias, any case), if any")
    maps_to: list[tuple[str, float]] = Field(description="(preset, weight) the reference renderer renders it as")


@router.get("/prompt", response_model=PromptMeaning, responses=ERRORS)
def prompt_meaning(text: str = Query(min_length=1, max_length=2000)) -> PromptMeaning:
    """What a prompt box's text means, by the one resolver every box uses (`prompt_presets.resolve_prompt`)."""
    from renderer.reference.style import prompt_blend

    prompt = resolve_prompt(text)
    blend = sorted(prompt_blend(Conditioning((prompt,))), key=lambda nw: -nw[1])
    return PromptMeaning(text=text, preset=prompt.preset, maps_to=[(n, round(w, 3)) for n, w in blend])


# ---- page configuration and schedules -------------------------------------------------------------------

@router.get("/config")
def config(request: Request) -> dict:
    """What the page's controls offer: easing names and their curves, built-in schedules, the upload limit.

    `easing_curves` holds each curve's weights at t = 0, 1/n … 1 (n = RAMP_SAMPLES), from the very functions
    the schedule renders with: the timeline draws these points, so no curve is defined twice."""
    curves = {name: [round(f(k / RAMP_SAMPLES), 6) for k in range(RAMP_SAMPLES + 1)] for name, f in EASINGS.items()}
    return {"easings": list(EASINGS), "easing_curves": curves, "schedules": builtin_names(),
            "upload_limit": _ui(request).upload_limit}


@router.get("/schedules/{name}", responses=ERRORS)
def builtin_schedule(name: str) -> dict:
    """A built-in schedule (e.g. eight_worlds, the report's 637-frame demo) as schedule JSON."""
    return load_builtin(name).to_json()


class ScheduleImport(BaseModel):
    text: str = Field(min_length=1, max_length=2_000_000, description="keyframe text, Parseq JSON, schedule JSON")
    format: Literal[FORMATS] = "auto"  # type: ignore[valid-type]
    fps: float | None = Field(None, gt=0, le=1000)


@router.post("/schedule/import", responses=ERRORS)
def import_schedule(body: ScheduleImport) -> dict:
    """Any supported schedule text → the canonical schedule JSON (what `render --schedule` takes)."""
    return parse_schedule_text(body.text, body.format, fps=body.fps, where="import").to_json()


@router.post("/schedule/validate", responses=ERRORS)
def validate_schedule(schedule: dict[str, Any]) -> dict:
    """A schedule JSON → its canonical form, or a one-line error naming the field."""
    return Schedule.from_json(schedule, "schedule").to_json()


# ---- G-buffer inspector -----------------------------------------------------------------------------------

def _latest_frame(request: Request, session_id: str):
    session = request.app.state.sessions.sessions.get(session_id)
    if session is None:
        raise HTTPException(404, f"no live session {session_id!r}")
    frame = inspector.wait_latest(session, INSPECTOR_WAIT_S)
    if frame is None:
        raise HTTPException(409, f"no frame rendered within {INSPECTOR_WAIT_S:g} s (paused?); ask again")
    return frame


@router.get("/sessions/{session_id}/inspector", responses=ERRORS)
def inspector_json(session_id: str, request: Request) -> dict:
    return inspector.inspector_info(_latest_frame(request, session_id))


@router.get("/sessions/{session_id}/inspector.png", response_class=Response, responses=ERRORS)
def inspector_image(session_id: str, request: Request) -> Response:
    frame = _latest_frame(request, session_id)
    return Response(inspector.inspector_png(frame), media_type="image/png",
                    headers={"X-Alaya-Frame": str(frame.index), "Cache-Control": "no-store"})


# ---- render to MP4 ----------------------------------------------------------------------------------------

class RenderRequest(SessionOptions):
    """A live session's options plus how many frames to render; the built-in engine runs on autopilot."""

    schedule: dict[str, Any] = Field(description="schedule JSON, as exported by the timeline editor")
    frames: int | None = Field(None, ge=1, description="default: the schedule's length")


@router.post("/renders", responses=ERRORS)
def start_render(body: RenderRequest, request: Request) -> dict:
    """Render the timeline offline as a live session of the same options would (size, renderer, seed, and
    the server's limits on them); the built-in engine runs on autopilot."""
    manager = request.app.state.sessions
    if body.source in ENGINE_INPUTS:
        body = body.model_copy(update={"source": "demo"})
    plan = manager.plan(body)
    source = manager.open_source(plan, "render")     # a bad source is a 400 now, not a failed job later
    try:
        renderer = manager.renderer(plan.renderer)
        job = _ui(request).jobs.start(body.frames, source, renderer, plan)
    except BaseException:
        source.close()
        raise
    return job.to_json()


def _job(request: Request, job_id: str) -> RenderJob:
    job = _ui(request).jobs.jobs.get(job_id)
    if job is None:
        raise HTTPException(404, f"no render job {job_id!r}")
    return job


@router.get("/renders/{job_id}", responses=ERRORS)
def render_status(job_id: str, request: Request) -> dict:
    return _job(request, job_id).to_json()


@router.get("/renders/{job_id}/video.mp4", response_class=FileResponse, responses=ERRORS)
def render_video(job_id: str, request: Request) -> FileResponse:
    job = _job(request, job_id)
    if job.state != "done":
        raise HTTPException(409, f"render {job_id} is {job.state}")
    return FileResponse(job.path, media_type="video/mp4", filename=f"alaya-{job_id}.mp4")
