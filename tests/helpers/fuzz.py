"""What every fuzzed parser must do: return a result or raise a one-line UserError. Anything else is a bug."""

from __future__ import annotations

import os
from typing import Any, Callable

from hypothesis import HealthCheck, settings

from alaya_errors import UserError

# FUZZ_SCALE=10 multiplies every example count, for a longer hunt than the suite's default. The suite itself
# is derandomized (tests/conftest.py): every run tries the same examples, so CI is red only for a real change;
# a hunt (FUZZ_SCALE set, or HYPOTHESIS_RANDOM=1) draws new ones, and what it finds becomes a fix and a test.
SCALE = float(os.environ.get("FUZZ_SCALE", "1"))


def fuzz_settings(examples: int, deadline_ms: int = 20_000) -> settings:
    """Modest example counts so the whole fuzz set runs in well under a minute on a shared 2-core machine;
    a per-example deadline turns a hang into a failure (generous: a loaded machine is no hang)."""
    return settings(max_examples=max(1, round(examples * SCALE)), deadline=deadline_ms, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def outcome(call: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """`call(*args, **kwargs)`'s result, or the UserError it raised after checking its message is one line."""
    try:
        return call(*args, **kwargs)
    except UserError as exc:
        assert str(exc).strip() and "\n" not in str(exc), f"error message is not one line: {exc!r}"
        return exc
