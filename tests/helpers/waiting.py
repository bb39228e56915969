"""Waiting on a condition with a bound, instead of sleeping and hoping: the loaded-machine-proof way to wait."""

from __future__ import annotations

import asyncio
import time
from typing import Callable


def wait_until(predicate: Callable[[], object], timeout: float, what: str, poll: float = 0.05):
    """`predicate()`'s first truthy value; fails the test naming `what` if none comes within `timeout` s."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(poll)


async def async_wait_until(predicate: Callable[[], object], timeout: float, what: str, poll: float = 0.05):
    """The same, on an event loop (the studio's or a viewer's keeps running while we wait)."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
        await asyncio.sleep(poll)
