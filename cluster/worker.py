"""The render worker: a Ray actor that loads one renderer and renders chunks for the sessions placed on it.

Threaded (max_concurrency above its capacity) so its sessions' chunks arrive together and, with batching on,
share passes; each session's state (history, memories, seed) stays in its RenderSession here, between chunks.
"""

from __future__ import annotations

import os
import socket
import threading
from typing import Sequence

from gbuffer.frame import GBufferFrame
from prompt_presets.conditioning import Conditioning
from renderer import RendererError, RenderResult, RenderSession, create_renderer


class RenderWorker:
    def __init__(self, name: str, renderer: str, options: dict, *, threads: int = 1,
                 batch_wait_ms: float | None = None, max_batch: int = 4):
        import torch

        torch.set_num_threads(max(1, threads))
        self.name = name
        inner = create_renderer(renderer, **options)
        if batch_wait_ms is not None:
            from renderer.batching import BatchedRenderer, batch_function

            inner = BatchedRenderer(inner, batch_function(renderer), max_wait_s=batch_wait_ms / 1e3,
                                    max_batch=max_batch)
        self.renderer = inner
        self.sessions: dict[str, RenderSession] = {}
        self._lock = threading.Lock()

    def ping(self) -> dict:
        """Who and where this worker is (the pool's health check and /api/health)."""
        return {"name": self.name, "node": socket.gethostname(), "pid": os.getpid(),
                "renderer": self.renderer.describe(), "sessions": len(self.sessions)}

    def open(self, session_id: str, width: int, height: int, seed: int) -> dict:
        session = self.renderer.open_session(width, height, seed)
        with self._lock:
            self.sessions[session_id] = session
        return {"chunk_size": session.chunk_size, "max_chunk": session.max_chunk}

    def render(self, session_id: str, frames: Sequence[GBufferFrame],
               conditioning: Sequence[Conditioning]) -> RenderResult:
        session = self.sessions.get(session_id)
        if session is None:
            raise RendererError(f"worker {self.name} has no session {session_id}", "cluster")
        return session.render(frames, conditioning)

    def close(self, session_id: str) -> None:
        with self._lock:
            session = self.sessions.pop(session_id, None)
        if session is not None:
            session.close()
