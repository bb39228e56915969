"""The return path (issue 27): an engine's own live session, whose styled frames go back to the engine.

Transport-neutral: the WebSocket feed (studio/server/feed_routes.py, feed protocol 2) and the gRPC service both
hold one `EngineLink` per connected engine. The session is a `LiveSession` like a visitor's, planned the same
way, under the same limits, listed by the manager, watched by browsers through its watch link, with an owner
key; what differs is that it has no peer:
- its worker hands each frame to a `FrameSlot` as it is rendered (latest frame wins), so an engine that stops
  reading stalls nothing, and one that reads slowly hears how many frames it missed;
- its video track is played here, to nobody but its watchers (what a peer's sender would do);
- its data channel is an `EngineChannel`: the engine's control messages go to the session's control (control.py),
  and their answers come back as dicts.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import time
from io import BytesIO
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
from aiortc.mediastreams import MediaStreamError
from pydantic import BaseModel, ConfigDict, Field, field_validator

from alaya_errors import UserError, validate
from gbuffer.feed import Feed
from gbuffer.feed.source import ARRIVAL
from gbuffer.feed.protocol import StyledFrame
from gbuffer.size import Size, SizeError
from timeline.rollout import RenderedFrame
from studio.server.access import Ownership
from studio.server.engine_channel import EngineChannel
from studio.server.models import SessionOptions
from studio.server.session import LiveSession

if TYPE_CHECKING:
    from studio.server.sessions import SessionManager

__all__ = ["EngineLink", "FrameSlot", "OutputRequest", "StyledFrame", "parse_output"]
log = logging.getLogger("alaya.engine")


class OutputRequest(BaseModel):
    """What an engine asks its session to render (the `output` object of a protocol-2 hello)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    renderer: str | None = Field(None, max_length=64, description="a renderer name; default: the studio's")
    size: tuple[int, int] | None = Field(None, description="'WxH' or [w, h]; default: the feed's size")
    prompt: str | None = Field(None, max_length=2000, description="preset name or free text (if no schedule)")
    schedule: dict[str, Any] | str | None = Field(None, description="what the schedule routes take: Schedule "
                                                  "JSON, a built-in name or keyframe text")
    format: Literal["rgb24", "jpeg"] = "rgb24"
    quality: int = Field(85, ge=1, le=100, description="JPEG quality")

    @field_validator("size", mode="before")
    @classmethod
    def _size(cls, v):
        if isinstance(v, str):
            try:
                return tuple(Size.parse(v))
            except SizeError as exc:
                raise ValueError(exc.detail) from None
        return v


def parse_output(data: Any) -> OutputRequest:
    """A hello's `output` → OutputRequest; UserError naming the field (`output.size: ...`) otherwise."""
    if data is None:
        return OutputRequest()
    if not isinstance(data, dict):
        raise UserError("must be an object, e.g. {\"format\": \"jpeg\"}", "output")
    try:
        return validate(OutputRequest, data, UserError)
    except UserError as exc:
        raise UserError(f"output.{exc.detail}") from None


class FrameSlot:
    """The newest rendered frame for one reader. `put` (the worker's thread) never waits; `take` (the event
    loop) waits for a frame newer than the last it took, and counts the ones it never saw."""

    def __init__(self, loop: asyncio.AbstractEventLoop):
        self._loop = loop
        self._lock = threading.Lock()
        self._latest: tuple[RenderedFrame, np.ndarray] | None = None
        self.produced = 0
        self._taken = 0                  # `produced` when the reader last took a frame
        self._ready = asyncio.Event()
        self.closed = False

    def put(self, frame: RenderedFrame, rgb: np.ndarray) -> None:
        with self._lock:
            self._latest = (frame, rgb)
            self.produced += 1
        self._wake()

    def close(self) -> None:
        self.closed = True
        self._wake()

    def _wake(self) -> None:
        try:
            self._loop.call_soon_threadsafe(self._ready.set)
        except RuntimeError:             # the loop is closed: the server is going away
            pass

    async def take(self) -> tuple[RenderedFrame, np.ndarray, int] | None:
        """→ (frame, its rgb, frames missed since the last take), or None once closed with nothing new."""
        while True:
            with self._lock:
                if self.produced > self._taken and self._latest is not None:   # produced: _latest is set
                    missed, self._taken = self.produced - self._taken - 1, self.produced
                    return (*self._latest, missed)
                if self.closed:
                    return None
                self._ready.clear()      # a put after this sets it again (through the loop)
            await self._ready.wait()


class EngineLink:
    """One engine's session and its way back. Made by `open`; `next_frame` until it answers None."""

    def __init__(self, manager: "SessionManager", session: LiveSession, request: OutputRequest, slot: FrameSlot,
                 channel: EngineChannel):
        self.manager, self.session, self.request = manager, session, request
        self.slot, self.channel = slot, channel
        self._player = asyncio.get_running_loop().create_task(self._play(), name=f"engine-track-{session.id}")

    @classmethod
    async def open(cls, manager: "SessionManager", feed: Feed, request: OutputRequest,
                   owner: Ownership) -> "EngineLink":
        """Start the engine's session on `feed` (connected, in the manager's feed hub). Raises UserError for a
        request the studio cannot serve (renderer, size, schedule), StudioFull when every slot is taken."""
        size = request.size or (feed.hello.width, feed.hello.height)
        options = validate(SessionOptions, dict(
            source=f"feed:{feed.name}", renderer=request.renderer, prompt=request.prompt, schedule=request.schedule,
            size=f"{size[0]}x{size[1]}", fps=min(feed.hello.fps, manager.settings.max_fps)), UserError, "output")
        loop = asyncio.get_running_loop()
        slot, channel = FrameSlot(loop), EngineChannel()
        session = await manager.start_for_engine(options, owner, slot.put, channel)
        return cls(manager, session, request, slot, channel)

    # ---- what the engine is told ----------------------------------------------------------------------

    @property
    def session_id(self) -> str:
        return self.session.id

    @property
    def owner_key(self) -> str | None:
        return self.session.owner_key

    @property
    def watch(self) -> dict:
        """The watch key and the links to watch this session with (the owner's `hello` carries the same)."""
        return self.session.audience.share()

    def welcome(self) -> dict:
        """What the engine learns of its session: id, owner key, watch link, and what it renders."""
        s = self.session
        watch = self.watch
        return {"session_id": s.id, "owner_key": s.owner_key, "watch": watch["page"], "watch_key": watch["key"],
                "renderer": s.renderer_name, "width": s.width, "height": s.height, "format": self.request.format}

    # ---- frames -----------------------------------------------------------------------------------------

    async def next_frame(self) -> StyledFrame | None:
        """The newest styled frame not read yet (waiting for one); None once the session has ended."""
        taken = await self.slot.take()
        if taken is None:
            return None
        frame, rgb, missed = taken
        fmt = self.request.format
        data = rgb.tobytes() if fmt == "rgb24" else await asyncio.to_thread(_jpeg, rgb, self.request.quality)
        arrived = frame.gbuffer.meta.get(ARRIVAL)
        studio_ms = (time.monotonic() - arrived) * 1e3 if arrived is not None else 0.0
        return StyledFrame(frame.gbuffer.index, rgb.shape[1], rgb.shape[0], fmt, data, missed,
                           round(frame.chunk_timings_ms.get("total", 0.0), 3), round(studio_ms, 3))

    async def _play(self) -> None:
        """The session's video track, pulled as a peer's sender would: the watchers get each frame and its status,
        and the session's figures count. It ends when the session's stream does, and so does `next_frame`."""
        try:
            while True:
                await self.session.track.recv()
        except MediaStreamError:
            pass
        finally:
            self.slot.close()
            self.channel.close()         # after the session's last messages (`ended`), which are queued first

    # ---- control ----------------------------------------------------------------------------------------

    async def control(self, message: dict | str) -> dict | None:
        """One data-channel message (prompt, blend, schedule, ...: docs/datachannel.md) → its answer (ack or
        error, as on the channel); None for the messages the channel never answers (key, input)."""
        try:
            return await self.channel.request(message if isinstance(message, str) else json.dumps(message))
        except Exception as exc:  # a handler's bug: this message fails, the engine's transport and session go on
            log.exception("engine control message failed")
            return {"type": "error", "message": f"internal error: {type(exc).__name__}: {exc}",
                    "where": "control", "request": None}

    async def next_message(self) -> dict | None:
        """The session's other messages (timeline changes, a take stopped, `ended`); None once it has ended."""
        return await self.channel.next_message()

    async def close(self, reason: str = "the engine closed its link") -> None:
        """End the session (if it has not ended on its own); `next_frame` and `next_message` answer None."""
        await self.manager.end(self.session, reason)
        await self._player


def _jpeg(rgb: np.ndarray, quality: int) -> bytes:
    from PIL import Image

    out = BytesIO()
    Image.fromarray(rgb).save(out, "JPEG", quality=quality)
    return out.getvalue()
