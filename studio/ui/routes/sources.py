"""The source picker: what the caller may play (the built-in engine, recorded sequences and uploads in the data
dir, connected engine feeds, finished takes), each with the id an offer's `source` takes."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from fastapi import APIRouter
from pydantic import BaseModel, Field

from gbuffer.formats.sequence import input_kind
from gbuffer.frame import GBufferError
from studio.server.deps import FeedsDep, KeyDep, SettingsDep, VisitorsDep
from studio.takes import TAKE_PREFIX
from studio.ui.routes.deps import UIDep
from studio.ui.uploads import UPLOAD_FOLDER

router = APIRouter()


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
