"""Tasks an owner starts and must not lose: held until they finish, cancelled and awaited when the owner closes.

A bare `asyncio.ensure_future` leaves the task referenced only by the loop: it can be collected while pending,
its exception is reported only as "never retrieved", and nothing cancels it at shutdown."""

from __future__ import annotations

import asyncio
import logging
from typing import Coroutine

log = logging.getLogger("alaya.tasks")


class TaskSet:
    def __init__(self, owner: str):
        self.owner = owner
        self._tasks: set[asyncio.Task] = set()

    def spawn(self, coro: Coroutine, name: str | None = None) -> asyncio.Task:
        """Start `coro` on the running loop and hold it; call on the loop's thread."""
        task = asyncio.get_running_loop().create_task(coro, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._finished)
        return task

    def _finished(self, task: asyncio.Task) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("%s: task %s failed", self.owner, task.get_name(), exc_info=task.exception())

    def __len__(self) -> int:
        return len(self._tasks)

    async def close(self) -> None:
        """Cancel what is still running (not the caller itself) and wait until it has finished."""
        current = asyncio.current_task()
        pending = [t for t in self._tasks if t is not current]
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)


async def cancel_and_wait(task: asyncio.Task | None) -> None:
    """Cancel one task and wait for it to finish (its exception, if any, is consumed)."""
    if task is None or task is asyncio.current_task():
        return
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
