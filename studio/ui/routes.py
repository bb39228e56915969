"""REST routes the studio page needs beyond the live server's own (/api/ui/...): the preset gallery with
thumbnails, the source picker and uploads, schedule import/validation for the timeline editor, the G-buffer
inspector and render-to-MP4 jobs. What a route needs (a live session, the session manager, the settings) comes
from studio.server.deps; the UI's own state from `UIDep` here."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, HTTPException, Query, Request
from fastapi.responses import FileResponse, JSONResponse, Response
from pydantic import BaseModel, Field
from starlette.requests import HTTPConnection

from alaya_errors import UserError
from gbuffer.formats.npy import RGB_SUFFIX, is_rgb_sibling, rgb_sibling
from gbuffer.formats.sequence import input_kind
from gbuffer.frame import GBufferError
from prompt_presets import Conditioning, load_presets, resolve_prompt
from timeline.schedule import FORMATS, Schedule, builtin_names, load_builtin, parse_schedule_text
from timeline.schedule.easing import EASINGS
from studio.server.deps import FeedsDep, KeyDep, ManagerDep, SessionDep, SettingsDep, VisitorDep, VisitorsDep
from studio.server.models import ErrorBody, SessionOptions
from studio.server.redact import hide_paths
from studio.sources import ENGINE_INPUTS
from timeline.rollout import RenderedFrame
from studio.takes import TAKE_PREFIX
from studio.ui import inspector
from studio.ui.jobs import RenderJob, RenderJobs
from studio.ui.thumbnails import ThumbnailCache
from studio.ui.uploads import UPLOAD_FOLDER, UploadError, save_upload, upload_path

ERRORS = {400: {"model": ErrorBody}, 401: {"model": ErrorBody}, 404: {"model": ErrorBody},
          422: {"model": ErrorBody}}
FULL = {409: {"model": ErrorBody}, 429: {"model": ErrorBody}, 507: {"model": ErrorBody}}
router = APIRouter(prefix="/api/ui", tags=["studio ui"], responses=ERRORS)
PNG = {200: {"content": {"image/png": {}}, "description": "a PNG image"}}
DEFAULT_UPLOAD_LIMIT = 256 * 2**20
RAMP_SAMPLES = 16                   # points per easing curve the timeline draws
INSPECTOR_WAIT_S = 3.0              # how long a request waits for a session's first rendered frame


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


@router.get("/presets/{name}/thumbnail.png", response_class=Response, responses=PNG)
def thumbnail(name: str, ui: UIDep) -> Response:
    """Rendered by the reference renderer from a real engine frame; cached on disk after the first request."""
    png = ui.thumbnails.png(name)
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
def sources(ui: UIDep, feeds: FeedsDep, settings: SettingsDep, visitors: VisitorsDep,
            key: KeyDep) -> list[SourceChoice]:
    """What the caller may play: another visitor's uploads and takes are left out (access.py)."""
    caller = visitors.find(key)
    out = [SourceChoice(id="engine", title="Built-in kart engine (click the video to drive)", kind="engine")]
    out += [SourceChoice(id=name, title=name, kind="recorded") for name in recorded_sequences(ui.data_dir)
            if visitors.may_use(caller, ui.data_dir / name)]
    out += [SourceChoice(id=f"feed:{f.name}", title=f"External engine {f.name} ({f.hello.width}x{f.hello.height})",
                         kind="feed") for f in feeds.feeds()]
    out += [SourceChoice(id=TAKE_PREFIX + t.id, title=t.title, kind="take") for t in settings.takes.finished()
            if visitors.may_use(caller, settings.takes_path / t.id)]
    return out


@router.get("/takes/{take_id}/schedule", response_model=Schedule, response_model_exclude_none=True)
def take_schedule(take_id: str, settings: SettingsDep, visitors: VisitorsDep, key: KeyDep) -> dict:
    """A take's schedule as played: what the timeline shows when the take is picked as the source."""
    visitors.require_source(visitors.find(key), TAKE_PREFIX + take_id, None, settings.takes_path)
    return settings.takes.open(take_id).schedule.to_json()


class UploadResult(BaseModel):
    source: str = Field(description="pass as the offer's `source` to play it")
    frames: int
    width: int
    height: int
    fps: float


class UploadRefusal(ErrorBody):
    detail: str | None = Field(None, description="the file reader's own account of what it found, for tools; "
                                                 "`error` says it in a visitor's words")


@router.put("/uploads/{name}", response_model=UploadResult, responses={**FULL, 400: {"model": UploadRefusal}})
async def upload(name: str, request: Request, ui: UIDep, visitor: VisitorDep, visitors: VisitorsDep,
                 settings: SettingsDep) -> UploadResult:
    """The request body is the file (.npy window or .gbuf.zip); it is checked by opening it as a sequence.
    It needs the visitor's owner key; a visitor holds a few uploads at a time, and a name another visitor
    uploaded is theirs (409). When full: 429 (your uploads) or 507 (the studio's disk quota). A file that is
    no sequence: 400 with `error` in a visitor's words and `detail` the reader's technical line."""
    declared = int(request.headers.get("content-length") or 0)
    if declared > ui.upload_limit:
        raise UploadError(f"larger than the upload limit of {ui.upload_limit / 2**20:.1f} MiB", name)
    path = upload_path(ui.data_dir, name)
    replacing = path.exists()
    if replacing and not visitor.owns(path):
        raise HTTPException(409, f"{name!r} is another visitor's upload; choose another name")
    partner = paired_name(path)      # X.npy and X.rgb.npy are read as one sequence: both must be the same visitor's
    if partner is not None and partner.exists() and not visitor.owns(partner):
        raise HTTPException(409, f"{name!r} would pair with another visitor's upload; choose another name")
    reservation = visitors.reserve(visitor, "uploads", path, replacing, declared or ui.upload_limit)
    try:
        path, info = await save_upload(request.stream(), ui.data_dir, name, ui.upload_limit, reservation.size)
        visitors.record(visitor, "uploads", path)      # also after a restart (studio/server/owners.py)
    except UploadError as exc:
        if exc.technical is None:
            raise
        refusal = UploadRefusal(error=str(exc), where=exc.where, detail=hide_paths(exc.technical, settings))
        return JSONResponse(refusal.model_dump(), status_code=400)
    finally:
        visitors.release(reservation)              # recorded by now, or failed: its place is free again
    return UploadResult(source=path.relative_to(ui.data_dir).as_posix(), **info)


def paired_name(path: Path) -> Path | None:
    """The file a .npy window is read together with: its RGB sibling, or the window an RGB sibling belongs to."""
    if is_rgb_sibling(path):
        return path.with_name(path.name[: -len(RGB_SUFFIX)] + ".npy")
    return rgb_sibling(path) if path.name.lower().endswith(".npy") else None


@router.delete("/uploads/{name}", status_code=204, response_class=Response)
def delete_upload(name: str, ui: UIDep, visitor: VisitorDep) -> None:
    """Remove one of the visitor's uploads (frees its place and bytes); the admin token removes any."""
    path = upload_path(ui.data_dir, name)
    if not (path.is_file() and visitor.owns(path)):
        raise HTTPException(404, f"you hold no upload {name!r}")
    path.unlink()


@router.delete("/takes/{take_id}", status_code=204, response_class=Response)
def delete_take(take_id: str, settings: SettingsDep, visitor: VisitorDep) -> None:
    """Remove one of the visitor's finished takes; the admin token removes any."""
    import shutil

    try:
        folder = settings.takes.open(take_id).folder
    except UserError:
        folder = None
    if folder is None or not visitor.owns(folder):
        raise HTTPException(404, f"you hold no finished take {take_id!r}")
    shutil.rmtree(folder)


# ---- prompts ----------------------------------------------------------------------------------------------

class PromptMeaning(BaseModel):
    text: str
    preset: str | None = Field(description="the preset the text names (its name or an alias, any case), if any")
    maps_to: list[tuple[str, float]] = Field(description="(preset, weight) the reference renderer renders it as")


@router.get("/prompt", response_model=PromptMeaning)
def prompt_meaning(text: str = Query(min_length=1, max_length=2000)) -> PromptMeaning:
    """What a prompt box's text means, by the one resolver every box uses (`prompt_presets.resolve_prompt`)."""
    from renderer.reference.style import prompt_blend

    prompt = resolve_prompt(text)
    blend = sorted(prompt_blend(Conditioning((prompt,))), key=lambda nw: -nw[1])
    return PromptMeaning(text=text, preset=prompt.preset, maps_to=[(n, round(w, 3)) for n, w in blend])


# ---- page configuration and schedules -------------------------------------------------------------------

class PageConfig(BaseModel):
    easings: list[str]
    easing_curves: dict[str, list[float]] = Field(description="each easing's weight at t = 0, 1/n … 1")
    schedules: list[str] = Field(description="built-in schedule names")
    upload_limit: int = Field(description="bytes")


@router.get("/config", response_model=PageConfig)
def config(ui: UIDep) -> PageConfig:
    """What the page's controls offer: easing names and their curves, built-in schedules, the upload limit.

    `easing_curves` holds each curve's weights at t = 0, 1/n … 1 (n = RAMP_SAMPLES), from the very functions
    the schedule renders with: the timeline draws these points, so no curve is defined twice."""
    curves = {name: [round(f(k / RAMP_SAMPLES), 6) for k in range(RAMP_SAMPLES + 1)] for name, f in EASINGS.items()}
    return PageConfig(easings=list(EASINGS), easing_curves=curves, schedules=builtin_names(),
                      upload_limit=ui.upload_limit)


@router.get("/schedules/{name}", response_model=Schedule, response_model_exclude_none=True)
def builtin_schedule(name: str) -> dict:
    """A built-in schedule (e.g. eight_worlds, the report's 637-frame demo) as schedule JSON."""
    return load_builtin(name).to_json()


class ScheduleImport(BaseModel):
    text: str = Field(min_length=1, max_length=2_000_000, description="keyframe text, Parseq JSON, schedule JSON")
    format: Literal[FORMATS] = "auto"  # type: ignore[valid-type]
    fps: float | None = Field(None, gt=0, le=1000)


@router.post("/schedule/import", response_model=Schedule, response_model_exclude_none=True)
def import_schedule(body: ScheduleImport) -> dict:
    """Any supported schedule text → the canonical schedule JSON (what `render --schedule` takes)."""
    return parse_schedule_text(body.text, body.format, fps=body.fps, where="import").to_json()


@router.post("/schedule/validate", response_model=Schedule, response_model_exclude_none=True)
def validate_schedule(schedule: dict[str, Any]) -> dict:
    """A schedule JSON → its canonical form, or a one-line error naming the field."""
    return Schedule.from_json(schedule, "schedule").to_json()


# ---- G-buffer inspector -----------------------------------------------------------------------------------

def latest_frame(session: SessionDep) -> RenderedFrame:
    """The session's newest rendered frame (blocking: FastAPI runs it on a worker thread)."""
    frame = inspector.wait_latest(session, INSPECTOR_WAIT_S)
    if frame is None:
        raise HTTPException(409, f"no frame rendered within {INSPECTOR_WAIT_S:g} s (paused?); ask again")
    return frame


LatestFrameDep = Annotated[RenderedFrame, Depends(latest_frame)]
BUSY = {409: {"model": ErrorBody}}


class InspectorInfo(BaseModel):
    frame: int
    label: str = Field(description="the frame's prompt")
    meta: dict[str, Any] = Field(description="the source's metadata (built-in engine: kart position, speed, …)")


@router.get("/sessions/{session_id}/inspector", response_model=InspectorInfo, responses=BUSY)
def inspector_json(frame: LatestFrameDep) -> dict:
    return inspector.inspector_info(frame)


@router.get("/sessions/{session_id}/inspector.png", response_class=Response, responses={**PNG, **BUSY})
def inspector_image(frame: LatestFrameDep) -> Response:
    return Response(inspector.inspector_png(frame), media_type="image/png",
                    headers={"X-Alaya-Frame": str(frame.index), "Cache-Control": "no-store"})


# ---- render to MP4 ----------------------------------------------------------------------------------------

class RenderRequest(SessionOptions):
    """A live session's options plus how many frames to render; the built-in engine runs on autopilot."""

    schedule: dict[str, Any] = Field(description="schedule JSON, as exported by the timeline editor")
    frames: int | None = Field(None, ge=1, description="default: the schedule's length")


class RenderJobInfo(BaseModel):
    id: str
    state: str = Field(description="running, then done or failed")
    frames: int
    done: int = Field(description="frames rendered so far")
    progress: float = Field(description="done / frames, 0..1")
    error: str | None
    download: str | None = Field(description="the MP4's URL once done")
    fps: float | None = Field(description="render speed, frames per second")


@router.post("/renders", response_model=RenderJobInfo)
def start_render(body: RenderRequest, manager: ManagerDep, ui: UIDep, visitor: VisitorDep,
                 visitors: VisitorsDep) -> dict:
    """Render the timeline offline as a live session of the same options would (size, renderer, seed, and
    the server's limits on them); the built-in engine runs on autopilot. The job and its MP4 answer only to
    the owner key that started it (and the admin token)."""
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
    return job.to_json()


def render_job(job_id: str, ui: UIDep, visitor: VisitorDep) -> RenderJob:
    """The job, for the visitor who started it or the admin; one 404 for a job that is gone or not yours."""
    job = ui.jobs.jobs.get(job_id)
    if job is None or not (visitor.admin or job.owner is visitor):
        raise HTTPException(404, f"you have no render job {job_id!r}")
    return job


RenderJobDep = Annotated[RenderJob, Depends(render_job)]


@router.get("/renders/{job_id}", response_model=RenderJobInfo)
def render_status(job: RenderJobDep) -> dict:
    return job.to_json()


@router.get("/renders/{job_id}/video.mp4", response_class=FileResponse,
            responses={200: {"content": {"video/mp4": {}}, "description": "the rendered MP4"}, **BUSY})
def render_video(job: RenderJobDep) -> FileResponse:
    if job.state != "done":
        raise HTTPException(409, f"render {job.id} is {job.state}")
    return FileResponse(job.path, media_type="video/mp4", filename=f"alaya-{job.id}.mp4")
