"""Uploaded sequence files: size-limited, validated by opening them, stored where sessions can play them."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import AsyncIterator

from alaya_errors import UserError
from gbuffer.formats import open_sequence
from gbuffer.formats.common import AtomicFile
from gbuffer.frame import GBufferError
from studio.server.access import QuotaFull
from studio.server.settings import UPLOAD_FOLDER

ACCEPTED_SUFFIXES = (".npy", ".gbuf.zip")
_SAFE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,120}$")


class UploadError(UserError):
    """An upload the studio refuses: bad name, too large, or not a readable G-buffer sequence.

    `technical`, when set, is the reader's own account (numpy's, the zip reader's): the API's JSON carries it
    as `detail` beside the visitor's line, and the page shows only the line."""

    def __init__(self, message: str, where: str | None = None, technical: str | None = None):
        super().__init__(message, where)
        self.technical = technical


# What a visitor is told when the file opens but holds something else, and when it cannot be read at all.
NOT_A_SEQUENCE = ("this file holds no G-buffer frames the studio can play; upload a .npy window of 8-bit frames "
                  "(frames × 5 channels × height × width × RGB) or a .gbuf.zip recording")
DAMAGED = "this file is damaged or cut short and cannot be read; export it again and upload the new copy"


def check_name(name: str) -> str:
    if not _SAFE_NAME.match(name) or ".." in name:
        raise UploadError("use letters, digits, '.', '_' or '-' (at most 121 characters)", "file name")
    if not name.lower().endswith(ACCEPTED_SUFFIXES):
        raise UploadError(f"{name!r} is not a sequence file; upload one of: {', '.join(ACCEPTED_SUFFIXES)}",
                          "file name")
    return name


def upload_path(data_dir: Path, name: str) -> Path:
    return data_dir / UPLOAD_FOLDER / check_name(name)


async def save_upload(chunks: AsyncIterator[bytes], data_dir: Path, name: str, max_bytes: int,
                      room: int | None = None) -> tuple[Path, dict]:
    """Stream an upload into `data_dir/uploads/name`, then open it as a sequence and read its first frame
    (in a worker thread); → (path, its `validate_sequence` info). Anything wrong removes what this upload wrote
    and raises UploadError with one line naming the problem; past `room` bytes (the disk quota's), QuotaFull.
    A file of that name is replaced only by an upload that arrives whole."""
    path = upload_path(data_dir, name)
    path.parent.mkdir(parents=True, exist_ok=True)
    target = AtomicFile(path, ".part", hidden=True)
    size = 0
    committed = False
    try:
        with open(target.tmp, "wb") as out:
            async for chunk in chunks:
                size += len(chunk)
                if size > max_bytes:
                    raise UploadError(f"larger than the upload limit of {max_bytes / 2**20:.1f} MiB", name)
                if room is not None and size > room:
                    raise QuotaFull("the studio's disk quota for uploads and takes is used up; this upload does "
                                    "not fit", name, 507)
                out.write(chunk)
        if size == 0:
            raise UploadError("the file is empty", name)
        target.commit()
        committed = True
        info = await asyncio.get_running_loop().run_in_executor(None, validate_sequence, path)
    except BaseException:
        target.discard()
        if committed:
            path.unlink(missing_ok=True)
        raise
    return path, info


def visitor_words(path: Path, detail: str) -> str:
    """The reader's refusal as a visitor reads it. Damage (truncated, corrupt, not an archive) and a .npy of
    the wrong shape or type get plain words; a .gbuf.zip reader's own lines (a missing manifest, frame
    counts) already speak of the recording and pass through."""
    if any(word in detail for word in ("truncated", "corrupt", "not a readable", "not a zip")):
        return DAMAGED
    return NOT_A_SEQUENCE if path.suffix.lower() == ".npy" else detail


def validate_sequence(path: Path) -> dict:
    """Open `path` as a recorded sequence and decode frame 0; → {frames, width, height, fps}."""
    try:
        with open_sequence(path) as source:
            if len(source) == 0:
                raise UploadError("the sequence has no frames", path.name)
            source[0]
            return {"frames": len(source), "width": source.width, "height": source.height, "fps": source.fps}
    except GBufferError as exc:
        raise UploadError(visitor_words(path, exc.detail), path.name, exc.detail) from None
    except (OSError, ValueError, KeyError, EOFError) as exc:   # a reader tripping over garbage bytes
        raise UploadError(DAMAGED, path.name, f"{type(exc).__name__}: {exc}".splitlines()[0]) from None
