"""No server paths in answers (issue 26): an error about a file in the data dir or the takes folder names it
relative to that folder, whatever code raised it (a reader tripping over a broken upload names its full path)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import overload

from studio.server.settings import Settings


def _folders(settings: Settings) -> list[tuple[str, str]]:
    """(absolute prefix, what answers say instead), longest first: the takes folder may lie in the data dir."""
    out = []
    if settings.data_dir is not None:
        out.append((Path(settings.data_dir), ""))
    out.append((settings.takes_path, "takes/"))
    pairs = []
    for folder, shown in out:
        for spelling in {str(Path(folder).absolute()), os.path.realpath(folder)}:
            pairs.append((spelling.rstrip(os.sep) + os.sep, shown))
            pairs.append((spelling.rstrip(os.sep), shown.rstrip("/") or "."))
    return sorted(pairs, key=lambda p: -len(p[0]))


@overload
def hide_paths(text: str, settings: Settings) -> str: ...
@overload
def hide_paths(text: None, settings: Settings) -> None: ...
@overload
def hide_paths(text: str | None, settings: Settings) -> str | None: ...


def hide_paths(text: str | None, settings: Settings) -> str | None:
    if not text:
        return text
    for prefix, shown in _folders(settings):
        text = text.replace(prefix, shown)
    return text
