"""An asyncio loop in a thread of its own, for tests that keep aiortc peers alive across several test functions
(module fixtures) while the test body itself stays synchronous."""

from __future__ import annotations

import asyncio
import threading
from typing import Any, Awaitable


class LoopThread:
    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="test-loop", daemon=True)
        self._thread.start()

    def run(self, coro: Awaitable[Any], timeout: float = 120) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)
