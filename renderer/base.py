"""The Renderer protocol every backend implements (reference shader, flash model, ...).

A Renderer is configured once (weights, device); `open_session` starts one rollout at a size and seed.
A RenderSession keeps its own history and takes frames in chunks of at most `chunk_size`, each frame with
its conditioning, and returns the RGB frames with per-stage timings. Renderers know nothing of WebRTC.

A RendererSpec says what the studio knows of a backend before importing it (name, size rule, options, how to
build it and batch its sessions); renderer/__init__.py declares the table and registers it here, so a backend
checks its sizes with `check_size` from this module and never imports the table back.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass, field
from typing import Callable, Iterator, Mapping, Sequence

import numpy as np

from alaya_errors import UserError
from gbuffer.frame import GBufferFrame
from gbuffer.size import Size, SizeError
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
    # Optional hooks, None where a backend has no such thing:
    host: str | None = None         # the render worker this session renders on (cluster/); None: this process
    on_lost: Callable[[str], None] | None = None   # set by the owner; called with the cause if the session is
                                                   # lost outside render() (its render worker died)

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

    # A caller that overlaps chunks (a live session's worker, studio/server/worker.py) calls begin_chunk, reads
    # the parts it returns on a second thread, and meanwhile calls between_chunks and the next begin_chunk. Where
    # `overlaps_chunks` is False it reads each chunk's parts to the end before it starts the next.
    overlaps_chunks: bool = False

    def begin_chunk(self, frames: Sequence[GBufferFrame],
                    conditioning: Sequence[Conditioning]) -> Iterator[RenderResult]:
        """render_stream's chunk, split where the next chunk stops depending on it: the call does what the next
        chunk needs (flash: the denoising steps, which update the history), the parts returned do the rest
        (flash: the decoder). By default the whole chunk is in the parts."""
        return self.render_stream(frames, conditioning)

    def between_chunks(self) -> None:
        """Work for the next chunk that needs only what the last begin_chunk left (flash: the history's tokens),
        done before the next chunk's frames arrive; by default nothing."""

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

    def close(self) -> None:
        """Free what the backend holds beyond its sessions (a batch thread); by default nothing."""


# sessions, their chunks → each session's result, or the exception its chunk raised (renderer/batching.py)
BatchFn = Callable[[Sequence[RenderSession], Sequence[Sequence[GBufferFrame]], Sequence[Sequence[Conditioning]]],
                   list["RenderResult | Exception"]]


@dataclass(frozen=True)
class SizeRule:
    """A renderer's one size rule: both sides a multiple of `multiple` (1: any size), and why."""

    multiple: int = 1
    why: str = "any size"

    def check(self, renderer: str, width: int, height: int, where: str = "size") -> Size:
        try:
            return Size(width, height).require_multiple(self.multiple, f"the {renderer} renderer: {self.why}", where)
        except SizeError as exc:
            raise RendererError(exc.detail, exc.where) from None


@dataclass(frozen=True)
class RendererSpec:
    """One backend, known without importing it: an offer's size and options are checked before a model loads.

    `load` and `batch` import the backend on first use (the reference renderer never pulls in the model stack).
    `options`: the backend's options that take one of a closed set of values (name → the values).
    `settings`: → the pydantic model of all its options (light to import); None: `options` are all it takes.
    `live_options`: the defaults `serve` gives it for live sessions, unless the operator sets them."""

    name: str
    size: SizeRule
    load: Callable[[], Callable[..., Renderer]]          # → the backend's Renderer class
    batch: Callable[[], BatchFn] | None = None           # → its batched forward pass; None: one session at a time
    options: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    settings: Callable[[], type] | None = None
    live_options: Mapping[str, object] = field(default_factory=dict)


_SPECS: dict[str, RendererSpec] = {}


def register(spec: RendererSpec) -> RendererSpec:
    _SPECS[spec.name] = spec
    return spec


def renderer_names() -> tuple[str, ...]:
    return tuple(_SPECS)


def renderer_spec(name: str, where: str = "--renderer") -> RendererSpec:
    try:
        return _SPECS[name]
    except KeyError:
        raise RendererError(f"unknown renderer {name!r}; choose one of {', '.join(_SPECS)}", where) from None


def check_size(renderer: str, width: int, height: int, where: str = "size") -> Size:
    """Size(width, height) if `renderer` can render it; else a RendererError naming the rule."""
    return renderer_spec(renderer).size.check(renderer, width, height, where)


def check_chunk(session: RenderSession, frames: Sequence[GBufferFrame],
                conditioning: Sequence[Conditioning]) -> None:
    """Shared argument checks for RenderSession.render implementations."""
    most = session.max_chunk or session.chunk_size
    if not 1 <= len(frames) <= most:
        raise RendererError(f"a chunk has 1..{most} frames, got {len(frames)}")
    if len(conditioning) != len(frames):
        raise RendererError(f"{len(frames)} frames but {len(conditioning)} conditionings")
