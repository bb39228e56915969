"""Schedule errors and import warnings, and the one place that turns pydantic's ValidationError into a one-liner."""

from __future__ import annotations

import warnings

from pydantic import ValidationError

from alaya_errors import UserError


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


def location(loc: tuple) -> str:
    """('segments', 3, 'transition', 'frames') → 'segments[3].transition.frames'."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part:
            out += f".{part}" if out else str(part)
    return out


def schedule_error(exc: ValidationError, where: str | None = None) -> ScheduleError:
    """The first error only, as `where: segments[3].transition.frames: <what is wrong> (got <value>)`."""
    err = exc.errors(include_url=False)[0]
    kind, message = err["type"], err["msg"]
    loc = location(tuple(p for p in err["loc"] if not str(p).startswith(("function-", "union["))))
    if kind == "schedule":                              # raised by the model's own checks (model._fail)
        message = err["ctx"]["message"]
        field = err["ctx"].get("field")
        loc = f"{loc}.{field}" if loc and field else loc or field or ""
    elif kind == "value_error":
        message = str(err["ctx"]["error"])          # without pydantic's "Value error, " prefix
    elif kind == "missing":
        message = "missing"
    elif kind == "extra_forbidden":
        message = "unknown field"
    elif _short(err.get("input")):
        message += f" (got {err['input']!r})"
    return ScheduleError(f"{loc}: {message}" if loc else message, where)


def _short(value) -> bool:
    return isinstance(value, (int, float, str, bool)) and len(repr(value)) <= 60
