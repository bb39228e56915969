"""Reading JSON text for schedules: a duplicate key is an error (json.loads would silently keep the last one,
and in a keyframe dict that drops a keyframe), and a syntax error is one line with its position."""

from __future__ import annotations

import json
from typing import Any

from timeline.schedule.errors import ScheduleError


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict:
    out: dict = {}
    for key, value in pairs:
        if key in out:
            raise ScheduleError(f"duplicate key {key!r}")
        out[key] = value
    return out


def load_json(text: str, where: str | None = None) -> Any:
    try:
        return json.loads(text, object_pairs_hook=_no_duplicates)
    except ScheduleError as exc:
        raise ScheduleError(exc.detail, where) from None
    except json.JSONDecodeError as exc:
        raise ScheduleError(f"not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}", where) from None
    except RecursionError:  # json's C parser recurses per nesting level; a few KiB of '[' exhausts the stack
        raise ScheduleError("not valid JSON: nested too deeply", where) from None
