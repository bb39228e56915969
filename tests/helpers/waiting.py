"""Waiting on a condition with a bound, instead of sleeping and hoping: the loaded-machine-proof way to wait.
(On an event loop, StudioViewer.wait_until does the same.)"""

from __future__ import annotations

import time
from typing import Callable


def wait_until(predicate: Callable[[], object], timeout: float, what: str, poll: float = 0.05):
    """`predicate()`'s first truthy value; fails the test naming `what` if none comes within `timeout` s."""
    deadline = time.monotonic() + timeout
    while not (value := predicate()):
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(poll)
    return value
