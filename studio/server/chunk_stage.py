"""The second stage of a live session's chunks: a thread that finishes each chunk (a flash decoder, its refiner,
the hand-over of its frames) while the session's worker begins the next one (its denoising). On a machine whose
cores the renderer would otherwise use one at a time, the two halves of consecutive chunks run side by side, so
the stream keeps the rate a chunk's larger half allows, not the whole chunk's (BENCHMARKS.md, "Flash live").

Jobs run one at a time, in the order submitted; at most one waits. A job's exception stops the stage: the
worker raises it on its own thread (raise_error), where a session's errors are handled.
"""

from __future__ import annotations

import queue
import threading
from typing import Callable

Job = Callable[[], None]


class ChunkStage:
    def __init__(self, name: str):
        self._jobs: queue.Queue[Job | None] = queue.Queue(maxsize=1)
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def submit(self, job: Job, stopped: Callable[[], bool]) -> bool:
        """Queue `job` behind the one running; → False if `stopped()` turned true while waiting for its turn."""
        while not stopped():
            try:
                self._jobs.put(job, timeout=0.05)
                return True
            except queue.Full:
                continue
        return False

    def raise_error(self) -> None:
        """On the worker's thread: the exception a job raised, if one did."""
        if self.error is not None:
            raise self.error

    def close(self, timeout_s: float) -> bool:
        """Run what was submitted, then end; → False if the thread is still running after `timeout_s`."""
        try:
            self._jobs.put(None, timeout=timeout_s)
        except queue.Full:
            return False
        self._thread.join(timeout_s)
        return not self._thread.is_alive()

    def _run(self) -> None:
        while (job := self._jobs.get()) is not None:
            if self.error is not None:
                continue            # a chunk after a failed one is not finished: the session is ending
            try:
                job()
            except BaseException as exc:  # noqa: BLE001 — handed to the worker's thread, which reports it
                self.error = exc
