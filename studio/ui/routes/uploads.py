"""Uploading a sequence file to play (checked by opening it, held to the visitor's and the studio's quotas) and
removing one. The file handling itself is studio/ui/uploads.py; who may hold what is studio/server/access.py."""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter, HTTPException, Request
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, Field

from gbuffer.formats.npy import RGB_SUFFIX, is_rgb_sibling, rgb_sibling
from studio.server.deps import SettingsDep, VisitorDep, VisitorsDep
from studio.server.models import ErrorBody
from studio.server.redact import hide_paths
from studio.ui.routes.deps import Responses, UIDep
from studio.ui.uploads import UploadError, save_upload, upload_path

router = APIRouter()
FULL: Responses = {409: {"model": ErrorBody}, 429: {"model": ErrorBody}, 507: {"model": ErrorBody}}


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
                 settings: SettingsDep) -> UploadResult | JSONResponse:
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
