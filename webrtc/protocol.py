"""The data-channel protocol: JSON messages between the browser and its session (see docs/datachannel.md).

Every message, in both directions, is one JSON object with a `type`; the pydantic models here are the single
definition of their fields. Client → server: `parse_client_message` turns text into one of `ClientMessage`,
`build` makes one from fields (OSC, REST), both raising `ProtocolError` with one line that names the field.
Server → client: `ServerMessage` models; `wire()` is the JSON sent.
"""

from __future__ import annotations

import json
import time
from typing import Annotated, Any, ClassVar, Literal, TypeVar, Union, get_args

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
# frames (it becomes a timeline.schedule Transition where the switch lands on the timeline). MAX_SWITCH_FRAMES is
# also the page's Transition field's max (GET /api/ui/config `limits`) and OSC's bound: one limit, said once.
MAX_SWITCH_FRAMES = 10_000
TransitionFrames = Annotated[int, Field(0, ge=0, le=MAX_SWITCH_FRAMES, description="blend length in frames; 0 = cut")]


class _Switch(_Message):
    """A switch of style made live: now (at the next frame not rendered yet), on the next beat or bar of the
    session's tempo (`quantize`), or on the frame the studio sends at the wall-clock time `at` (an OSC bundle's
    timetag); with both, on the first beat or bar from `at`."""

    transition: TransitionFrames = 0
    quantize: Literal["beat", "bar"] | None = None
    at: float | None = Field(None, allow_inf_nan=False, description="the studio's clock, Unix seconds")


class SetPrompt(_Switch):
    type: Literal["prompt"]
    text: str = Field(min_length=1, max_length=2000)


class SetPreset(_Switch):
    type: Literal["preset"]
    name: str = Field(min_length=1, max_length=100)


class SetBlend(_Switch):
    type: Literal["blend"]
    prompts: list[PromptSpec] = Field(min_length=1, max_length=8)
    mode: Literal["linear", "slerp"] = "linear"


SWITCHES = (SetPrompt, SetPreset, SetBlend)       # the messages a timetag or a tempo can place


class SetTempo(_Message):
    """The show's tempo (a beat falls now), or none (`bpm` null): what quantized switches land on."""

    type: Literal["tempo"]
    bpm: float | None = Field(None, ge=20, le=300, allow_inf_nan=False)
    beats_per_bar: int = Field(4, ge=1, le=16)


MAX_SCREEN_DELAY_MS = 2000.0


class ScreenDelay(_Message):
    """How long a frame takes from leaving the studio's pacing to the owner's screen, as the owner's page measures
    it (latency.js). Quantized and timed switches are placed that much before their moment, so the new style
    reaches the screen on the beat rather than leaving the studio on it. Not answered: the page sends it as it
    changes."""

    type: Literal["screen_delay"]
    ms: float = Field(ge=0, le=MAX_SCREEN_DELAY_MS, allow_inf_nan=False)


class Beat(_Message):
    """An external clock's tick: a beat falls now (a downbeat: the first of a bar)."""

    type: Literal["beat"]
    downbeat: bool = False


class SetSchedule(_Message):
    """Replace the whole schedule: `schedule` in the Schedule JSON format, or `text` in a keyframe syntax."""

    type: Literal["schedule"]
    schedule: dict[str, Any] | None = None
    text: str | None = Field(None, max_length=200_000)
    # true when the visitor applies a whole schedule (not an edit of the one playing): it then begins at the
    # frame on screen, from its first block (docs/ui.md, "Past the end")
    from_now: bool = False


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
          Autopilot, Stats, Take, Ping, Stamp, SetTempo, Beat, ScreenDelay],
    Field(discriminator="type")]
_adapter: TypeAdapter = TypeAdapter(ClientMessage)
CLIENT_MODELS: dict[str, type[BaseModel]] = {
    get_args(model.model_fields["type"].annotation)[0]: model for model in get_args(get_args(ClientMessage)[0])}
MESSAGE_TYPES = tuple(CLIENT_MODELS)
M = TypeVar("M", bound=BaseModel)


def parse_client_message(text: str | bytes) -> ClientMessage:
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
        raise _protocol_error(exc, kind) from None


def build(model: type[M], **fields: Any) -> M:
    """A client message made from fields rather than text (OSC, REST), checked like a parsed one."""
    kind = get_args(model.model_fields["type"].annotation)[0]
    try:
        return model(type=kind, **fields)
    except ValidationError as exc:
        raise _protocol_error(exc, kind, skip=0) from None


BOUNDS = frozenset({"greater_than", "greater_than_equal", "less_than", "less_than_equal"})


def _protocol_error(exc: ValidationError, kind: str, skip: int = 1) -> ProtocolError:
    err = exc.errors()[0]
    field = ".".join(str(p) for p in err["loc"][skip:]) or "message"       # parsed: loc starts with the type
    # a value out of bounds is named, so the page can say what was sent against the limit (words.js)
    got = f" (got {err['input']!r})" if err["type"] in BOUNDS and isinstance(err.get("input"), (int, float)) else ""
    return ProtocolError(f"{field}: {err['msg']}{got}", f"{kind} message")


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


# ---- server → client --------------------------------------------------------------------------------------

class _ServerMessage(BaseModel):
    OMITTED_WHEN_NONE: ClassVar[frozenset[str]] = frozenset()   # fields a message leaves out rather than null

    def wire(self) -> dict:
        """The JSON object sent (docs/datachannel.md)."""
        return self.model_dump(exclude={k for k in self.OMITTED_WHEN_NONE if getattr(self, k) is None})

    def text(self) -> str:
        return json.dumps(self.wire())


class SessionFacts(BaseModel):
    """What a session is: the same in its `hello` and in the REST API's session info."""

    session_id: str
    source: str
    renderer: str
    width: int
    height: int
    fps: float


class Hello(_ServerMessage, SessionFacts):
    """Once the channel opens. The owner's has `watch` (the watch key and its links); a watcher's has
    `role` "watcher" instead."""

    OMITTED_WHEN_NONE = frozenset({"watch", "role", "owner_key"})
    type: Literal["hello"] = "hello"
    protocol: int = PROTOCOL_VERSION
    recorded: bool
    frames: int | None                 # a recorded source's length
    live: bool
    codec: str | None
    watch: dict[str, Any] | None = None
    role: Literal["watcher"] | None = None
    owner_key: str | None = None       # issue 26: the owner's only; what the session's REST routes need


class Status(_ServerMessage):
    """One per frame sent."""

    OMITTED_WHEN_NONE = frozenset({"control", "take"})
    type: Literal["status"] = "status"
    frame: int                         # timeline frame
    prompts: list[dict[str, Any]]
    label: str
    stages_ms: dict[str, float]        # the renderer's, for the whole chunk
    chunk_size: int
    rendered_wall: float               # when rendering the chunk began, Unix seconds
    take_ms: float                     # from then, until the chunk's frames had come from the source
    ready_ms: float                    # from then, until this frame was rendered and handed over
    control: dict[str, Any] | None = None   # the built-in engine's steer/throttle/brake for this frame
    fps: float                         # measured send rate
    target_fps: float
    slow: bool
    latency_ms: float                  # from the start of rendering the chunk to the frame leaving
    state: str
    queued: int                        # rendered, waiting to be sent: the hand-over's depth
    encode_ms: float | None            # the previous frame's (this one is encoded after its status)
    take: dict[str, Any] | None = None      # the take being recorded: frames, seconds


class TakeStatus(BaseModel):
    """A take's status after a start or stop: the `take` ack's details, and what the REST take route answers
    (fields past `recording` once a take exists)."""

    action: Literal["start", "stop"] | None = None
    recording: bool | None = None
    take_id: str | None = None
    frames: int | None = Field(None, description="frames recorded so far")
    seconds: float | None = Field(None, description="wall-clock seconds since the take started")
    path: str | None = Field(None, description="the take's folder, relative to the studio's data (takes/ID)")


class Ack(_ServerMessage, TakeStatus):
    """A client message applied: `request` is its type, `frame` where it took effect, and its details (a take's:
    its `TakeStatus`)."""

    OMITTED_WHEN_NONE = frozenset({"frame", "transition", "label", "whole_loop", "until", "on",
                                   *TakeStatus.model_fields})
    type: Literal["ack"] = "ack"
    request: str
    frame: int | None = None
    transition: int | None = None
    label: str | None = None
    whole_loop: bool | None = None     # a live switch that took the whole loop
    until: int | None = None           # a live switch over a prepared timeline: where its next block takes over
    on: bool | None = None


class Preparing(_ServerMessage):
    """A free-text switch waits for the text-matching model; its ack follows once it applies."""

    type: Literal["preparing"] = "preparing"
    request: str
    label: str


class TimelineChanged(_ServerMessage):
    """The session changed its own schedule (the next pass of a loop after a live switch)."""

    type: Literal["timeline"] = "timeline"
    frame: int
    reason: str


class Error(_ServerMessage):
    """A message or command that failed; the session keeps running (unless it says it ended)."""

    type: Literal["error"] = "error"
    message: str
    where: str | None
    request: str | None


class StatsReport(_ServerMessage):
    """The answer to `stats`."""

    type: Literal["stats"] = "stats"
    session_id: str
    state: str
    frame: int
    frames_sent: int
    fps: float
    target_fps: float
    codec: str | None
    bitrate: int | None
    errors: int
    time_to_first_frame_ms: float | None
    last: dict[str, Any]               # the last frame sent: frame, label, sent_wall, stages_ms, latency_ms


class Pong(_ServerMessage):
    type: Literal["pong"] = "pong"
    t: float                           # the page's clock, echoed
    server_ms: float                   # the server's clock, Unix milliseconds

    @classmethod
    def answer(cls, t: float) -> "Pong":
        return cls(t=t, server_ms=time.time() * 1e3)


class TakeStopped(_ServerMessage):
    """A take's files are closed."""

    type: Literal["take"] = "take"
    state: Literal["stopped"] = "stopped"
    take_id: str
    frames: int
    path: str
    reason: str | None                 # why recording stopped early, if it did


class Ended(_ServerMessage):
    type: Literal["ended"] = "ended"
    frame: int | None
    reason: str


ServerMessage = Union[Hello, Status, Ack, Preparing, TimelineChanged, Error, StatsReport, Pong, TakeStopped, Ended]


def error_message(exc: Exception, request: str | None = None) -> Error:
    """Server → client error; the session keeps running."""
    where = getattr(exc, "where", None)
    detail = getattr(exc, "detail", None) or str(exc)
    return Error(message=detail, where=where, request=request)
