"""The Renderer protocol every backend implements (reference shader, flash model, ...).

A Renderer is configured once (weights, device); `open_session` starts one rollout at a size and seed.
A RenderSession keeps its own history and takes frames in chunks of at most `chunk_size`, each frame with
its conditioning, and returns the RGB frames with per-stage timings. Renderers know nothing of WebRTC.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass, field
from typing import Iterator, Sequence

import numpy as np

from alaya_errors import UserError
from gbuffer.frame import GBufferFrame
from prompt_presets.conditioning import Conditioning


class RendererError(UserError):
    """A renderer that cannot be created or used as asked (unknown name, bad size, missing weights)."""


class RendererFull(Exception):
    """No room for another session now (a pool of render workers at capacity): try again later."""


@dataclass
class RenderResult:
    """One chunk's output. rgb: uint8 (T, H, W, 3); timings_ms: stage name → milliseconds for the chunk;
    peak_memory_bytes: accelerator (or process) peak during the chunk where measurable."""

    rgb: np.ndarray
    timings_ms: dict[str, float] = field(default_factory=dict)
    peak_memory_bytes: int | None = None


class RenderSession(abc.ABC):
    """One rollout. Not thread-safe: one caller renders at a time (a worker thread in the server)."""

    width: int
    height: int
    seed: int
    chunk_size: int                 # frames a rollout hands over per step (what a live session waits for)
    max_chunk: int | None = None    # frames render() accepts at once when more than chunk_size (None: the same)

    @abc.abstractmethod
    def render(self, frames: Sequence[GBufferFrame], conditioning: Sequence[Conditioning]) -> RenderResult:
        """Render 1..chunk_size consecutive frames; `conditioning[i]` belongs to `frames[i]`.

        A chunk shorter than chunk_size is allowed (end of a sequence) and returns as many frames.
        Frames whose size differs from the session's are resized by the session.
        """

    def render_stream(self, frames: Sequence[GBufferFrame],
                      conditioning: Sequence[Conditioning]) -> Iterator[RenderResult]:
        """The same chunk as `render`, in parts as soon as each is ready (flash: per decoded latent frame), so
        a live session can send the first frames before the chunk's last ones exist. The parts hold the
        chunk's frames in order, all of them; each part's timings are the chunk's so far. By default: one part."""
        yield self.render(frames, conditioning)

    def close(self) -> None:
        """Free history and accelerator memory; safe to call twice."""

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class Renderer(abc.ABC):
    name: str
    chunk_size: int

    @abc.abstractmethod
    def open_session(self, width: int, height: int, seed: int = 0) -> RenderSession: ...

    def describe(self) -> dict:
        """What the UI and /api/health show about this backend."""
        return {"name": self.name, "chunk_size": self.chunk_size}


def check_chunk(session: RenderSession, frames: Sequence[GBufferFrame],
                conditioning: Sequence[Conditioning]) -> None:
    """Shared argument checks for RenderSession.render implementations."""
    most = session.max_chunk or session.chunk_size
    if not 1 <= len(frames) <= most:
        raise RendererError(f"a chunk has 1..{most} frames, got {len(frames)}")
    if len(conditioning) != len(frames):
        raise RendererError(f"{len(frames)} frames but {len(conditioning)} conditionings")
