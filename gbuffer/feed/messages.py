"""The studio's text messages to an engine on its feed (docs/feed.md), as models: the `welcome` answering its
hello, the player's `input` and its sessions' `event`s. Each side builds and reads these, never a dict by its
keys or a string by its prefix. The data channel's own messages (protocol 2's control answers and session
messages) travel on the same socket and stay what docs/datachannel.md says: `parse_studio_text` hands them on as
dicts."""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from gbuffer.feed.protocol import FeedError


class _FeedMessage(BaseModel):
    model_config = ConfigDict(extra="forbid")

    def wire(self) -> dict[str, Any]:
        return self.model_dump(exclude_none=True)

    def text(self) -> str:
        return json.dumps(self.wire())


class Welcome(_FeedMessage):
    """The answer to a hello: the feed's source name and limits; with an `output` (protocol 2) its session too."""

    type: Literal["welcome"] = "welcome"
    protocol: int
    source: str
    max_fps: float
    max_pixels: int
    session_id: str | None = None
    owner_key: str | None = None
    watch: str | None = None
    watch_key: str | None = None
    renderer: str | None = None
    width: int | None = None
    height: int | None = None
    format: str | None = None
    meta: bool | None = None           # the hello offered meta messages and this studio reads them


class EngineInput(_FeedMessage):
    """What a viewer of one of the feed's sessions drives with (gbuffer.input.PlayerInput), newest wins."""

    type: Literal["input"] = "input"
    steer: float
    throttle: float
    brake: float
    reset: bool
    handbrake: bool = False
    session_id: str | None = None


class SessionEvent(_FeedMessage):
    """A session began or stopped playing the feed."""

    type: Literal["event"] = "event"
    event: Literal["session_started", "session_ended"]
    session_id: str = ""


FeedMessage = Union[Welcome, EngineInput, SessionEvent]
_MESSAGES: TypeAdapter = TypeAdapter(Annotated[FeedMessage, Field(discriminator="type")])
KINDS = frozenset({"welcome", "input", "event"})


def parse_studio_text(text: str | bytes) -> FeedMessage | dict:
    """One text message from the studio: a feed message as its model, a data-channel message as its dict.
    A malformed one raises FeedError naming what is wrong."""
    try:
        message = json.loads(text)
    except (ValueError, RecursionError):
        raise FeedError(f"the studio sent text that is not JSON: {str(text)[:60]!r}") from None
    if not isinstance(message, dict):
        raise FeedError(f"the studio sent a JSON {type(message).__name__}, not an object")
    if message.get("type") not in KINDS:
        return message
    try:
        return _MESSAGES.validate_python(message)
    except ValidationError as exc:
        err = exc.errors()[0]
        field = ".".join(str(p) for p in err["loc"][1:]) or "message"
        raise FeedError(f"the studio's {message['type']} message: {field}: {err['msg']}") from None
