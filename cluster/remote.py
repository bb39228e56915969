"""The studio's side of a render worker: a Renderer whose sessions render on the pool's workers.

Media path: the front keeps the source (engine, feed, recording) and the encoder; each chunk's G-buffer frames
go to the worker and its RGB frames come back through Ray's object store, then the front encodes them as for
an in-process session. The front's cost per stream is the engine, the transfer and the encoder; the render is
the worker's (BENCHMARKS.md, "Render workers on Ray").
"""

from __future__ import annotations

import uuid
from typing import Callable, Sequence

from alaya_errors import UserError
from cluster.pool import WorkerHandle, WorkerPool, short_cause
from gbuffer.frame import GBufferFrame
from prompt_presets.conditioning import Conditioning
from renderer import Renderer, RendererError, RenderResult, RenderSession, check_size

OPEN_TIMEOUT_S = 120.0           # a worker opening a session (the first one may still be loading its model)


class RemoteRenderer(Renderer):
    def __init__(self, pool: WorkerPool):
        self.pool = pool
        self.name = pool.settings.renderer

    @property
    def chunk_size(self) -> int:  # type: ignore[override]   # read from the workers, never set
        for worker in self.pool.workers:
            size = worker.info.get("renderer", {}).get("chunk_size")
            if size:
                return size
        return 1

    def open_session(self, width: int, height: int, seed: int = 0) -> "RemoteSession":
        import ray

        check_size(self.name, width, height)
        session_id = uuid.uuid4().hex[:12]
        session = RemoteSession(self.pool, session_id, width, height, seed)
        worker = self.pool.place(session_id, session)
        try:
            info = ray.get(worker.actor.open.remote(session_id, width, height, seed), timeout=OPEN_TIMEOUT_S)
        except BaseException as exc:
            self.pool.release(worker, session_id)
            raise remote_error(self.pool, worker, exc) from None
        session.worker, session.chunk_size, session.max_chunk = worker, info["chunk_size"], info["max_chunk"]
        return session

    def describe(self) -> dict:
        return {"name": self.name, "chunk_size": self.chunk_size, "workers": self.pool.describe()}


class RemoteSession(RenderSession):
    def __init__(self, pool: WorkerPool, session_id: str, width: int, height: int, seed: int):
        self.pool, self.id = pool, session_id
        self.width, self.height, self.seed = width, height, seed
        self.chunk_size, self.max_chunk = 1, None
        self.worker: WorkerHandle | None = None
        self.on_lost: Callable[[str], None] | None = None    # the studio ends its live session with the cause
        self.lost_cause: str | None = None
        self._closed = False

    @property
    def host(self) -> str | None:  # type: ignore[override]   # the worker it was placed on, never set
        return self.worker.name if self.worker is not None else None

    def render(self, frames: Sequence[GBufferFrame], conditioning: Sequence[Conditioning]) -> RenderResult:
        import ray

        if self.lost_cause is not None:
            raise RendererError(self.lost_cause, "cluster")
        worker = self.worker
        if worker is None:
            raise RendererError("the session is not open on a render worker", "cluster")
        try:
            result: RenderResult = ray.get(worker.actor.render.remote(self.id, list(frames), list(conditioning)))
        except BaseException as exc:
            raise remote_error(self.pool, worker, exc) from None
        return result

    def lost(self, cause: str) -> None:
        """From the pool: this session's worker died (also when the session is not rendering right now)."""
        self.lost_cause = f"render worker {self.worker.name if self.worker else '?'} died: {cause}"
        if self.on_lost is not None:
            self.on_lost(self.lost_cause)

    def close(self) -> None:
        if self._closed or self.worker is None:
            return
        self._closed = True
        self.pool.release(self.worker, self.id)
        if self.lost_cause is None:
            try:
                self.worker.actor.close.remote(self.id)       # fire and forget: nothing to wait for
            except Exception:  # noqa: BLE001 - the worker is gone already
                pass


def remote_error(pool: WorkerPool, worker: WorkerHandle, exc: BaseException) -> Exception:
    """What a failed call to a worker means for the session: the worker died (every session on it hears it),
    or the renderer there refused this chunk (its own one-line error)."""
    from ray.exceptions import RayActorError, RayTaskError

    if isinstance(exc, RayTaskError):
        cause = getattr(exc, "cause", None)
        if isinstance(cause, UserError):
            return cause
        return RendererError(f"render worker {worker.name}: {short_cause(exc)}", "cluster")
    if isinstance(exc, RayActorError):
        cause = short_cause(exc)
        pool.died(worker, cause)
        return RendererError(f"render worker {worker.name} died: {cause}", "cluster")
    if isinstance(exc, UserError):
        return exc
    return RendererError(f"render worker {worker.name}: {type(exc).__name__}: {exc}", "cluster")
