"""Batched sessions: many sessions of one renderer share its forward passes (issue 13).

`BatchedRenderer(inner, render_batch)` opens sessions whose `render()` hands the chunk to one batch thread and
waits for its result. The thread takes the first chunk that arrives, waits at most `max_wait_s` for the other
open sessions' chunks (never when a session is alone), renders them together with `render_batch(sessions,
frames, conditioning)` and hands each session its own result. So:
- sessions join (open) and leave (close) between chunks without disturbing the others;
- a session whose chunk is late holds the others back by `max_wait_s` at most;
- a session's frames do not depend on its batch (the batch function's contract; flash: renderer/flash/batch.py);
- a session whose chunk fails gets its error; the others in the batch get their frames.
"""

from __future__ import annotations

import queue
import threading
import time
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Sequence

from gbuffer.frame import GBufferFrame
from prompt_presets.conditioning import Conditioning
from renderer.base import BatchFn, Renderer, RendererError, RenderResult, RenderSession, renderer_spec

DEFAULT_WAIT_S = 0.010
DEFAULT_MAX_BATCH = 4


@dataclass
class _Request:
    session: RenderSession
    frames: Sequence[GBufferFrame]
    conditioning: Sequence[Conditioning]
    done: Future = field(default_factory=Future)


@dataclass
class BatchStats:
    """What the batch thread did: how many passes, and how many chunks each carried."""

    batches: int = 0
    chunks: int = 0
    sizes: list[int] = field(default_factory=list)      # the last 1000 batch sizes

    def note(self, size: int) -> None:
        self.batches += 1
        self.chunks += size
        self.sizes = (self.sizes + [size])[-1000:]


class BatchedRenderer(Renderer):
    def __init__(self, inner: Renderer, render_batch: BatchFn, *, max_wait_s: float = DEFAULT_WAIT_S,
                 max_batch: int = DEFAULT_MAX_BATCH):
        self.inner = inner
        self.name = inner.name
        self.chunk_size = inner.chunk_size
        self.render_batch = render_batch
        self.max_wait_s = max_wait_s
        self.max_batch = max(1, max_batch)
        self.stats = BatchStats()
        self._open = 0                   # sessions open now: how many chunks a batch can expect
        self._lock = threading.Lock()
        self._requests: queue.SimpleQueue[_Request | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None

    def open_session(self, width: int, height: int, seed: int = 0) -> "BatchedSession":
        session = BatchedSession(self, self.inner.open_session(width, height, seed))
        with self._lock:
            self._open += 1
            if self._thread is None:
                self._thread = threading.Thread(target=self._serve, name=f"batch-{self.name}", daemon=True)
                self._thread.start()
        return session

    def describe(self) -> dict:
        return {**self.inner.describe(), "batching": {"max_wait_ms": self.max_wait_s * 1e3,
                                                      "max_batch": self.max_batch, "sessions": self._open}}

    def close(self) -> None:
        """Stop the batch thread (sessions still open get a RendererError on their next chunk)."""
        with self._lock:
            thread, self._thread = self._thread, None
        if thread is not None:
            self._requests.put(None)
            thread.join(10)

    # ---- called by sessions ----------------------------------------------------------------------------

    def _submit(self, request: _Request) -> RenderResult:
        if self._thread is None:
            raise RendererError("the batch thread is stopped")
        self._requests.put(request)
        return request.done.result()

    def _closed(self) -> None:
        with self._lock:
            self._open -= 1

    # ---- the batch thread --------------------------------------------------------------------------------

    def _serve(self) -> None:
        while (first := self._requests.get()) is not None:
            batch = [first]
            deadline = time.monotonic() + self.max_wait_s
            while len(batch) < min(self.max_batch, max(1, self._open)):
                try:
                    more = self._requests.get(timeout=max(0.0, deadline - time.monotonic()))
                except queue.Empty:
                    break
                if more is None:
                    self._requests.put(None)     # stop after this batch
                    break
                if any(r.session is more.session for r in batch):
                    self._requests.put(more)     # a session's next chunk waits for its previous one's batch
                    break
                batch.append(more)
            self._render(batch)
        # stopped: whatever still waits learns why
        while True:
            try:
                request = self._requests.get_nowait()
            except queue.Empty:
                return
            if request is not None:
                request.done.set_exception(RendererError("the batch thread is stopped"))

    def _render(self, batch: list[_Request]) -> None:
        self.stats.note(len(batch))
        try:
            results = self.render_batch([r.session for r in batch], [r.frames for r in batch],
                                        [r.conditioning for r in batch])
        except Exception as exc:  # noqa: BLE001 - a failure of the pass itself: every chunk in it failed
            results = [exc] * len(batch)
        for request, result in zip(batch, results):
            if isinstance(result, BaseException):
                request.done.set_exception(result)    # raised in that session's own render() call
            else:
                request.done.set_result(result)


def render_each(sessions: Sequence[RenderSession], frames: Sequence[Sequence[GBufferFrame]],
                conditioning: Sequence[Sequence[Conditioning]]) -> list[RenderResult | Exception]:
    """The batch function of a renderer with no batched pass (the reference renderer's frames are independent
    per-pixel math): one session after another, on the batch thread."""
    out: list[RenderResult | Exception] = []
    for session, f, c in zip(sessions, frames, conditioning):
        try:
            out.append(session.render(f, c))
        except Exception as exc:  # noqa: BLE001 - that session's error, handed to it
            out.append(exc)
    return out


class BatchedSession(RenderSession):
    """A session of a BatchedRenderer: its own state lives in `inner`; its chunks go through the batch thread."""

    def __init__(self, owner: BatchedRenderer, inner: RenderSession):
        self.owner, self.inner = owner, inner
        self.width, self.height, self.seed = inner.width, inner.height, inner.seed
        self.chunk_size = inner.chunk_size
        self.max_chunk = inner.max_chunk
        self._closed = False

    def render(self, frames: Sequence[GBufferFrame], conditioning: Sequence[Conditioning]) -> RenderResult:
        if self._closed:
            raise RendererError("this session is closed")
        return self.owner._submit(_Request(self.inner, frames, conditioning))

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self.owner._closed()
        self.inner.close()


def batch_function(name: str) -> BatchFn:
    """The batch function of renderer `name` (its spec's batched pass, else one session after another)."""
    load = renderer_spec(name).batch
    return load() if load is not None else render_each
