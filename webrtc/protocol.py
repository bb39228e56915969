"""The data-channel protocol: JSON messages between the browser and its session (see docs/datachannel.md).

Every client message is one JSON object with a `type`; pydantic models here are the single definition of
their fields. `parse_client_message` turns text into a model or raises `ProtocolError` with one line that
names the field. Server messages are plain dicts built by the helpers at the bottom.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from alaya_errors import UserError
from gbuffer.input import PlayerInput
from prompt_presets import PromptSpec

PROTOCOL_VERSION = 1
MAX_MESSAGE_BYTES = 64 * 1024


class ProtocolError(UserError):
    """A data-channel message that is not valid JSON or not a known message."""


class _Message(BaseModel):
    model_config = ConfigDict(extra="forbid")


# A live switch's transition, as its length in frames: 0 = a cut, n = a blend of the message's `mode` over n
# frames (it becomes a studio.schedule Transition where the switch lands on the timeline).
TransitionFrames = Annotated[int, Field(0, ge=0, le=10_000, description="blend length in frames; 0 = cut")]


class SetPrompt(_Message):
    type: Literal["prompt"]
    text: str = Field(min_length=1, max_length=2000)
    transition: TransitionFrames = 0


class SetPreset(_Message):
    type: Literal["preset"]
    name: str = Field(min_length=1, max_length=100)
    transition: TransitionFrames = 0


class SetBlend(_Message):
    type: Literal["blend"]
    prompts: list[PromptSpec] = Field(min_length=1, max_length=8)
    mode: Literal["linear", "slerp"] = "linear"
    transition: TransitionFrames = 0


class SetSchedule(_Message):
    """Replace the whole schedule: `schedule` in the Schedule JSON format, or `text` in a keyframe syntax."""

    type: Literal["schedule"]
    schedule: dict[str, Any] | None = None
    text: str | None = Field(None, max_length=200_000)


class PatchSchedule(_Message):
    """Add a switch at a timeline frame (future or past) to the current schedule."""

    type: Literal["switch"]
    frame: int = Field(ge=0)
    prompts: list[PromptSpec] = Field(min_length=1, max_length=8)
    mode: Literal["linear", "slerp"] = "linear"
    transition: TransitionFrames = 0


class Play(_Message):
    type: Literal["play"]


class Pause(_Message):
    type: Literal["pause"]


class Seek(_Message):
    type: Literal["seek"]
    frame: int = Field(ge=0)


class Loop(_Message):
    type: Literal["loop"]
    on: bool = True


KEYS = ("left", "right", "up", "down", "space", "reset")


class Key(_Message):
    """A key going down or up; `left/right` steer, `up` throttle, `down` brake then reverse, `space` brake and
    hold (never reverses), `reset` once on down."""

    type: Literal["key"]
    key: Literal["left", "right", "up", "down", "space", "reset"]
    down: bool


class Input(_Message):
    """Analogue input (gamepad): replaces the key state."""

    type: Literal["input"]
    steer: float = Field(0.0, ge=-1, le=1)
    throttle: float = Field(0.0, ge=0, le=1)
    brake: float = Field(0.0, ge=0, le=1)
    reset: bool = False


class Autopilot(_Message):
    type: Literal["autopilot"]
    on: bool


class Stats(_Message):
    type: Literal["stats"]


class Take(_Message):
    """Start or stop recording a take (input G-buffers, schedule as played, output as sent)."""

    type: Literal["take"]
    action: Literal["start", "stop"]


class Ping(_Message):
    """Clock probe: answered at once with `pong` carrying `t` back and the server's clock, so the page can put
    its own display times on the server's clock (glass-to-glass latency across machines)."""

    type: Literal["ping"]
    t: float = Field(allow_inf_nan=False, description="the page's clock, Unix milliseconds")


class Stamp(_Message):
    """Draw the frame index into each frame's corner from now on (or stop): what the page reads back to
    measure glass-to-glass latency (docs/datachannel.md#frame-stamp)."""

    type: Literal["stamp"]
    on: bool


ClientMessage = Annotated[
    Union[SetPrompt, SetPreset, SetBlend, SetSchedule, PatchSchedule, Play, Pause, Seek, Loop, Key, Input,
          Autopilot, Stats, Take, Ping, Stamp],
    Field(discriminator="type")]
_adapter: TypeAdapter = TypeAdapter(ClientMessage)
MESSAGE_TYPES = ("prompt", "preset", "blend", "schedule", "switch", "play", "pause", "seek", "loop", "key",
                 "input", "autopilot", "stats", "take", "ping", "stamp")


def parse_client_message(text: str | bytes) -> BaseModel:
    """One data-channel message → its model, or ProtocolError naming what is wrong."""
    if isinstance(text, bytes):
        if len(text) > MAX_MESSAGE_BYTES:
            raise ProtocolError(f"message of {len(text)} bytes exceeds {MAX_MESSAGE_BYTES}", "data channel")
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError:
            raise ProtocolError("binary message is not UTF-8 JSON", "data channel") from None
    if len(text) > MAX_MESSAGE_BYTES:
        raise ProtocolError(f"message of {len(text)} characters exceeds {MAX_MESSAGE_BYTES}", "data channel")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ProtocolError(f"not JSON ({exc.msg} at character {exc.pos})", "data channel") from None
    except RecursionError:  # json's C parser recurses per nesting level; 64 KiB of '[' exhausts the stack
        raise ProtocolError("JSON nested too deeply", "data channel") from None
    if not isinstance(data, dict):
        raise ProtocolError("a message is a JSON object with a 'type'", "data channel")
    kind = data.get("type")
    if kind not in MESSAGE_TYPES:
        raise ProtocolError(f"unknown message type {kind!r}; known: {', '.join(MESSAGE_TYPES)}", "data channel")
    try:
        return _adapter.validate_python(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        field = ".".join(str(p) for p in err["loc"][1:]) or "message"
        raise ProtocolError(f"{field}: {err['msg']}", f"{kind} message") from None


class KeyState:
    """Held keys → PlayerInput. Reset is one-shot: it fires once per key press."""

    def __init__(self) -> None:
        self.held: set[str] = set()

    def press(self, key: str, down: bool) -> PlayerInput:
        if down:
            self.held.add(key)
        else:
            self.held.discard(key)
        steer = float("right" in self.held) - float("left" in self.held)
        reset = down and key == "reset"
        return PlayerInput(steer=steer, throttle=float("up" in self.held),
                           brake=float(bool({"down", "space"} & self.held)), reset=reset,
                           handbrake="space" in self.held and "down" not in self.held)


def error_message(exc: Exception, request: str | None = None) -> dict:
    """Server → client error; the session keeps running."""
    where = getattr(exc, "where", None)
    detail = getattr(exc, "detail", None) or str(exc)
    return {"type": "error", "message": detail, "where": where, "request": request}
