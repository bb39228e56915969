"""Which visitor owns which upload and take, kept beside them so that a restart changes nobody's rights (issue 26).

One small JSON file (`.alaya-owners.json` in the data dir; a bare app with no data dir keeps ownership for its run
only), rewritten atomically on each change: per visitor, the SHA-256 of its owner key (never the key, so the file
is no credential) and the names of what it holds, relative to their folders (an upload's name in the uploads
folder, a take's id). A page that kept
its key (sessionStorage) and offers with it after a restart is the same visitor again, with its uploads and takes.

A file that cannot be read, or that names files outside their folders, gets one log line and is set aside: the
studio starts with no owners, and then every upload and take already on disk has no known owner, which makes it
the admin's only (access.Visitors.may_use), never everyone's.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from gbuffer.formats.common import write_atomic

log = logging.getLogger("alaya.owners")

INDEX_NAME = ".alaya-owners.json"
VERSION = 1


def real_path(path) -> Path:
    """`path` with its links resolved; a name no file can have (a NUL in it, from a request) as written."""
    try:
        return Path(os.path.realpath(path))
    except ValueError:
        return Path(os.path.abspath(path))


def key_digest(key: str) -> str:
    """What the index keeps of an owner key: its SHA-256, hex (192 random bits: no dictionary finds them)."""
    return hashlib.sha256(key.encode("utf-8", "surrogateescape")).hexdigest()


class OwnerRecord(BaseModel):
    model_config = ConfigDict(extra="forbid")

    key_sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    uploads: list[str] = []       # names in the uploads folder
    takes: list[str] = []         # take ids in the takes folder


class OwnersFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    version: int = Field(VERSION, ge=VERSION, le=VERSION)
    visitors: list[OwnerRecord] = []


@dataclass(frozen=True)
class Folders:
    """Where visitors' files live: the uploads folder and the index (None without a data dir), the takes folder."""

    uploads: Path | None
    takes: Path
    index: Path | None

    def of(self, kind: str) -> Path | None:
        return self.uploads if kind == "uploads" else self.takes

    def inside(self, path: Path) -> str | None:
        """The kind of visitors' file `path` is ("uploads" or "takes", by its folder), else None (the data dir's
        own sequences). The folder itself counts as inside: played as a source it would be every visitor's
        files as one sequence, so nobody owns it (issue 42)."""
        real = real_path(path)
        for kind in ("uploads", "takes"):
            folder = self.of(kind)
            if folder is not None and real.is_relative_to(real_path(folder)):
                return kind
        return None


def read_index(folders: Folders) -> list[tuple[str, dict[str, list[Path]]]]:
    """(key digest, {"uploads": [path], "takes": [path]}) per visitor, files gone since left out; [] when there
    is no index yet, or (one warning) when it cannot be trusted."""
    path = folders.index
    if path is None or not path.is_file():
        return []
    try:
        index = OwnersFile.model_validate(json.loads(path.read_text()))
        out = []
        for record in index.visitors:
            held = {kind: [_resolve(folders, kind, name) for name in getattr(record, kind)]
                    for kind in ("uploads", "takes")}
            out.append((record.key_sha256, {kind: [p for p in paths if p.exists()] for kind, paths in held.items()}))
        return out
    except (OSError, UnicodeDecodeError, ValueError, ValidationError) as exc:
        aside = path.with_name(path.name + ".unreadable")
        os.replace(path, aside)
        log.warning("the owners index %s cannot be used (%s); set aside as %s: the uploads and takes already "
                    "there are the admin's only until someone records them again", path.name,
                    str(exc).splitlines()[0], aside.name)
        return []


def write_index(folders: Folders, visitors: list[tuple[str, dict[str, list[Path]]]]) -> None:
    """The index as it stands (visitors holding nothing are left out), in one atomic write."""
    if folders.index is None:
        return
    records = []
    for digest, held in visitors:
        names = {kind: [_name(folders, kind, p) for p in held[kind]] for kind in ("uploads", "takes")}
        if names["uploads"] or names["takes"]:
            records.append(OwnerRecord(key_sha256=digest, **names))
    folders.index.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(folders.index, OwnersFile(visitors=records).model_dump_json(indent=1).encode())


def _resolve(folders: Folders, kind: str, name: str) -> Path:
    folder = folders.of(kind)
    if folder is None:
        raise ValueError(f"{kind} named but this studio has no {kind} folder")
    path = real_path(Path(folder) / name)
    if folders.inside(path) != kind or path.parent != real_path(folder):
        raise ValueError(f"{name!r} is not a name in the {kind} folder")
    return path


def _name(folders: Folders, kind: str, path: Path) -> str:
    return Path(path).name          # uploads and takes are plain names in their folders (_resolve checks it)
