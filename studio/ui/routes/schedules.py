"""What the timeline editor's controls offer (easings and their curves, built-in schedules, the upload limit),
the built-in schedules themselves, and schedule import and validation: any supported text in, the canonical
schedule JSON out (what `render --schedule` and the live session take)."""

from __future__ import annotations

from typing import Any, Literal

from fastapi import APIRouter
from pydantic import BaseModel, Field

from timeline.schedule import FORMATS, MAX_FRAMES, Schedule, builtin_names, load_builtin, parse_schedule_text
from timeline.schedule.easing import EASINGS
from timeline.schedule.errors import collected_warnings
from studio.ui.jobs import MAX_JOB_FRAMES
from studio.ui.routes.deps import UIDep
from webrtc.protocol import MAX_SWITCH_FRAMES

router = APIRouter()
RAMP_SAMPLES = 16                   # points per easing curve the timeline draws
# The page's number fields take their max from here: the very constants the server validates those values with,
# so a field never offers what the studio refuses, nor a message quote a limit the field does not show.
FIELD_LIMITS = {"switch_transition_frames": MAX_SWITCH_FRAMES,    # the Transition field (a live switch's blend)
                "block_transition_frames": MAX_FRAMES,             # a timeline block's transition (Selected row)
                "render_frames": MAX_JOB_FRAMES}                   # Render to MP4's frame count


class PageConfig(BaseModel):
    easings: list[str]
    easing_curves: dict[str, list[float]] = Field(description="each easing's weight at t = 0, 1/n … 1")
    schedules: list[str] = Field(description="built-in schedule names")
    upload_limit: int = Field(description="bytes")
    limits: dict[str, int] = Field(description="the most each of the page's number fields takes: the limits the "
                                               "server validates with (a transition's frames, a render's frames)")


@router.get("/config", response_model=PageConfig)
def config(ui: UIDep) -> PageConfig:
    """What the page's controls offer: easing names and their curves, built-in schedules, the upload limit, the
    number fields' limits.

    `easing_curves` holds each curve's weights at t = 0, 1/n … 1 (n = RAMP_SAMPLES), from the very functions
    the schedule renders with: the timeline draws these points, so no curve is defined twice."""
    curves = {name: [round(f(k / RAMP_SAMPLES), 6) for k in range(RAMP_SAMPLES + 1)] for name, f in EASINGS.items()}
    return PageConfig(easings=list(EASINGS), easing_curves=curves, schedules=builtin_names(),
                      upload_limit=ui.upload_limit, limits=FIELD_LIMITS)


@router.get("/schedules/{name}", response_model=Schedule, response_model_exclude_none=True)
def builtin_schedule(name: str) -> Schedule:
    """A built-in schedule (e.g. eight_worlds, the report's 637-frame demo) as schedule JSON."""
    return load_builtin(name)


class ScheduleImport(BaseModel):
    text: str = Field(min_length=1, max_length=2_000_000, description="keyframe text, Parseq JSON, schedule JSON")
    format: Literal[FORMATS] = "auto"  # type: ignore[valid-type]
    fps: float | None = Field(None, gt=0, le=1000)


class ImportedSchedule(BaseModel):
    schedule: Schedule = Field(description="the canonical schedule JSON (what `render --schedule` takes)")
    warnings: list[str] = Field(description="what the import could not carry over exactly, one line each: a "
                                            "dropped negative prompt, frames before the first keyframe, a "
                                            "one-word prompt that names no style…; empty when nothing was lost")


@router.post("/schedule/import", response_model=ImportedSchedule, response_model_exclude_none=True)
def import_schedule(body: ScheduleImport) -> ImportedSchedule:
    """Any supported schedule text → the canonical schedule JSON, and the import's warnings (docs/ui.md,
    "Imports"): an import never loses anything without saying so."""
    with collected_warnings() as warnings:
        schedule = parse_schedule_text(body.text, body.format, fps=body.fps, where="import")
    return ImportedSchedule(schedule=schedule, warnings=warnings)


@router.post("/schedule/validate", response_model=Schedule, response_model_exclude_none=True)
def validate_schedule(schedule: dict[str, Any]) -> Schedule:
    """A schedule JSON → its canonical form, or a one-line error naming the field."""
    return Schedule.from_json(schedule, "schedule")
