"""Schedule errors and import warnings; pydantic errors become one-liners through `alaya_errors.one_line`."""

from __future__ import annotations

import warnings

from pydantic import ValidationError

from alaya_errors import UserError, one_line


class ScheduleError(UserError):
    """A bad schedule, keyframe text or Parseq export; the message names the segment and field."""


class ScheduleImportWarning(UserWarning):
    """Something an import could not carry over exactly (a negative prompt, a keyframe before frame 0...).
    The CLI prints these as `warning: ...`; the import itself still succeeded."""


def warn(message: str, where: str | None = None) -> None:
    warnings.warn(ScheduleImportWarning(within(where, message)), stacklevel=3)


def within(where: str | None, inner: str) -> str:
    """'show.json', 'keyframe 120' → 'show.json: keyframe 120' (a `where` inside a file)."""
    return f"{where}: {inner}" if where else inner


def schedule_error(exc: ValidationError, where: str | None = None) -> ScheduleError:
    """The first error only, as `where: segments[3].transition.frames: <what is wrong> (got <value>)`."""
    return ScheduleError(one_line(exc), where)
