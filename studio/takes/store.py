"""The takes folder: where takes are recorded, which takes are there, and opening one to replay or re-render."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Protocol

from alaya_errors import UserError
from timeline.schedule import Schedule
from studio.takes.recorder import (DEFAULT_MIN_FREE, INPUT, SCHEDULE, TAKE_META, TakeError, TakeInfo,
                                   TakeRecorder)

TAKE_ID = re.compile(r"\d{8}-\d{6}-[0-9a-f]{6}")   # what TakeRecorder.start names a take: a name, never a path
TAKE_PREFIX = "take:"                                 # a take as a live session's source: take:ID


class TakeStarter(Protocol):
    """What a session starts its takes with: the TakeStore itself, or one visitor's share of it (VisitorTakes in
    studio/server/access.py)."""

    def start(self, on_stopped: Callable[[TakeInfo], None], **fields) -> TakeRecorder: ...


@dataclass(frozen=True)
class Take:
    """A finished take, opened: its metadata (take.json), its input recording and its schedule as played."""
    folder: Path
    meta: dict
    input: Path
    schedule: Schedule


@dataclass(frozen=True)
class TakeSummary:
    """A finished take, as the source picker lists it."""
    id: str
    frames: int
    width: int
    height: int
    fps: float
    source: str
    renderer: str

    @property
    def title(self) -> str:
        return (f"Take {self.id}: {self.frames} frames of {self.source}, {self.width}x{self.height} "
                f"({self.renderer})")


@dataclass
class TakeStore:
    folder: Path
    min_free_bytes: int = DEFAULT_MIN_FREE

    def __post_init__(self):
        self.folder = Path(self.folder)

    def start(self, on_stopped: Callable[[TakeInfo], None], max_bytes: int | None = None, **fields) -> TakeRecorder:
        """A take recording now; `max_bytes`: the disk quota's room for it (it stops cleanly there)."""
        return TakeRecorder.start(self.folder, on_stopped, min_free_bytes=self.min_free_bytes, max_bytes=max_bytes,
                                  **fields)

    def finished(self) -> list[TakeSummary]:
        """Complete takes, newest first; folders being recorded (no take.json yet) or broken are left out."""
        if not self.folder.is_dir():
            return []
        out = []
        for path in sorted(self.folder.iterdir(), reverse=True):
            if not (TAKE_ID.fullmatch(path.name) and is_take(path)):
                continue
            try:
                meta = open_take(path).meta
                out.append(TakeSummary(path.name, int(meta["frames"]), meta["width"], int(meta["height"]),
                                       float(meta["fps"]), str(meta["source"]), str(meta["renderer"])))
            except (UserError, KeyError, TypeError, ValueError):
                continue
        return [t for t in out if t.frames > 0]

    def open(self, take_id: str) -> Take:
        """Finished take `take_id`; a TakeError when there is no such take."""
        path = self.folder / take_id
        if not TAKE_ID.fullmatch(take_id) or not is_take(path):
            raise TakeError(f"no take {take_id!r} in the takes folder", "source")
        return open_take(path)


def is_take(path: str | Path) -> bool:
    return (Path(path) / TAKE_META).is_file()


def open_take(path: str | Path) -> Take:
    """A take folder, opened; a TakeError naming what is missing or unreadable."""
    folder = Path(path)
    try:
        meta = json.loads((folder / TAKE_META).read_text())
        schedule = Schedule.from_json(json.loads((folder / SCHEDULE).read_text()), str(folder))
    except FileNotFoundError as exc:
        raise TakeError(f"not a complete take: {Path(exc.filename).name} is missing", str(folder)) from None
    except (OSError, json.JSONDecodeError) as exc:
        raise TakeError(f"cannot read the take: {exc}", str(folder)) from None
    if not isinstance(meta, dict) or not isinstance(meta.get("width"), int):
        raise TakeError("take.json is not a take's metadata", str(folder))
    return Take(folder, meta, folder / INPUT, schedule)
