"""Waiting on a running studio's sessions (BackgroundServer)."""

from __future__ import annotations

import asyncio
import time


async def wait_no_sessions(studio, timeout: float = 10.0) -> bool:
    """True once the studio holds no live session, False if some are still there after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while studio.sessions and time.monotonic() < deadline:
        await asyncio.sleep(0.1)
    return not studio.sessions
