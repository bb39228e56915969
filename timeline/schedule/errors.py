"""Schedule errors and import warnings; pydantic errors become one-liners through `alaya_errors.one_line`."""

from __future__ import annotations

import warnings
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Iterator

from pydantic import ValidationError

from alaya_errors import UserError, one_line


class ScheduleError(UserError):
    """A bad schedule, keyframe text or Parseq export; the message names the segment and field."""


class ScheduleImportWarning(UserWarning):
    """Something an import could not carry over exactly (a negative prompt, a keyframe before frame 0...).
    The CLI prints these as `warning: ...`; the import itself still succeeded."""


# the list an import's warnings go to instead of Python's warnings, while `collected_warnings` runs (per thread
# and per task: a server imports for many visitors at once, and warnings.catch_warnings is process-wide)
_collecting: ContextVar[list[str] | None] = ContextVar("schedule_import_warnings", default=None)


def warn(message: str, where: str | None = None) -> None:
    sink = _collecting.get()
    if sink is not None:
        sink.append(message)           # the caller knows where it imported from
        return
    warnings.warn(ScheduleImportWarning(within(where, message)), stacklevel=3)


@contextmanager
def collected_warnings() -> Iterator[list[str]]:
    """The import warnings raised inside the block, in order, as one-line messages (without the `where` the
    caller passed): what an API answers beside the schedule it imported."""
    sink: list[str] = []
    token = _collecting.set(sink)
    try:
        yield sink
    finally:
        _collecting.reset(token)


def within(where: str | None, inner: str) -> str:
    """'show.json', 'keyframe 120' → 'show.json: keyframe 120' (a `where` inside a file)."""
    return f"{where}: {inner}" if where else inner


def schedule_error(exc: ValidationError, where: str | None = None) -> ScheduleError:
    """The first error only, as `where: segments[3].transition.frames: <what is wrong> (got <value>)`."""
    return ScheduleError(one_line(exc), where)
