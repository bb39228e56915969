"""The one exception type for mistakes a user can make (a bad file, schedule, request or engine message), and
the one place that turns a pydantic ValidationError into such a one-line message.

Every package raises a subclass of `UserError` with a one-line message that names what is wrong
(the file, the segment, the field). The CLI turns it into `error: ...` and exit code 2, the API into
HTTP 4xx with a JSON body. Anything else that escapes is a bug and may show a traceback.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from pydantic import BaseModel, TypeAdapter, ValidationError
from pydantic_core import PydanticCustomError

M = TypeVar("M", bound=BaseModel)

# The error type of checks across fields (raised with `field_error`); its context carries the message as written.
CHECK_ERROR = "alaya_check"


class UserError(ValueError):
    """A one-line, user-facing error. `where` names the file, field or message that was wrong."""

    def __init__(self, message: str, where: str | None = None):
        self.where = where
        self.detail = message
        super().__init__(f"{where}: {message}" if where else message)


def field_error(message: str, field: str | None = None) -> PydanticCustomError:
    """Raise from a model validator for a check across fields; `field` (e.g. 'segments[3].start') extends the
    error's location, and the message reaches the user as written."""
    return PydanticCustomError(CHECK_ERROR, "{message}", {"message": message, "field": field})


def location(loc: tuple) -> str:
    """('segments', 3, 'transition', 'frames') → 'segments[3].transition.frames'."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part:
            out += f".{part}" if out else str(part)
    return out


def one_line(exc: ValidationError) -> str:
    """The first error only, as `segments[3].transition.frames: <what is wrong> (got <value>)`."""
    return describe_error(exc.errors(include_url=False)[0])


def describe_error(err: Mapping[str, Any], skip: tuple[str, ...] = ()) -> str:
    """One pydantic error dict as a line; `skip` drops location parts (FastAPI's 'body')."""
    kind, message = err["type"], err["msg"]
    loc = location(tuple(p for p in err["loc"]
                         if p not in skip and not str(p).startswith(("function-", "union["))))
    if kind == CHECK_ERROR:
        message = err["ctx"]["message"]
        field = err["ctx"].get("field")
        loc = f"{loc}.{field}" if loc and field else loc or field or ""
    elif kind == "value_error":
        message = str(err["ctx"]["error"])          # without pydantic's "Value error, " prefix
    elif kind == "missing":
        message = "missing"
    elif kind in ("extra_forbidden", "unexpected_keyword_argument"):  # a model's / a dataclass's extra key
        message = "unknown field"
    elif _short(err.get("input")):
        message += f" (got {err['input']!r})"
    return f"{loc}: {message}" if loc else message


def validate(model: type[M] | TypeAdapter, data: Any,
             error: Callable[[str, str | None], Exception] = UserError, where: str | None = None) -> Any:
    """`model` validated from `data`, or `error(one line, where)`: the one way every parser checks its input.
    `error` is a UserError subclass, or a function that builds one (to reword the line or pick its fields)."""
    try:
        if isinstance(model, TypeAdapter):
            return model.validate_python(data)
        return model.model_validate(data)
    except ValidationError as exc:
        raise error(one_line(exc), where) from None


def _short(value: Any) -> bool:
    return isinstance(value, (int, float, str, bool)) and len(repr(value)) <= 60
