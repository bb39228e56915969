"""Parsing what strangers send (schedules above all) off the event loop, a few at a time (issue 42).

A schedule's cost is bounded (studio/schedule/parseq.py), but a bounded cost times an unbounded queue is still
unbounded: so parses run on two threads of their own, and when more than `MAX_WAITING` wait for them the next
one is refused at once (503) instead of queuing behind them. The default executor stays free for everything
else (renderer loading, source opening)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

THREADS = 2
MAX_WAITING = 16

T = TypeVar("T")


class ParsersBusy(Exception):
    """Too many parses are waiting; answered with 503 and Retry-After, as a full studio."""


class ParsePool:
    def __init__(self, threads: int = THREADS, max_waiting: int = MAX_WAITING):
        self._executor = ThreadPoolExecutor(threads, thread_name_prefix="parse")
        self._threads, self._max_waiting = threads, max_waiting
        self._lock = threading.Lock()      # one pool for every server in the process (tests run several)
        self._queued = 0                   # running or waiting

    async def run(self, parse: Callable[..., T], *args) -> T:
        with self._lock:
            if self._queued >= self._threads + self._max_waiting:
                raise ParsersBusy(f"the studio is busy parsing {self._queued} requests; try again in a moment")
            self._queued += 1
        try:
            return await asyncio.get_running_loop().run_in_executor(self._executor, parse, *args)
        finally:
            with self._lock:
                self._queued -= 1


PARSERS = ParsePool()
