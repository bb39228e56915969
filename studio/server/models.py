"""Request and response shapes of the REST API: the single definition, so /docs documents them."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from gbuffer.size import Size, SizeError
from webrtc.protocol import SessionFacts


class SessionOptions(BaseModel):
    """What a live session and an offline render of it both ask for; SessionPlanner.plan resolves them against
    the server's settings, the same way for both."""

    model_config = ConfigDict(extra="forbid")

    source: str = Field("demo", max_length=500, description="'demo' (engine on autopilot), 'engine' (you "
                        "drive), 'feed:NAME' (a connected external engine) or a sequence path in the data dir")
    renderer: str | None = Field(None, description="'reference' or 'flash'; default: the server's")
    schedule: dict[str, Any] | str | None = Field(None, description="Schedule JSON, a built-in schedule name "
                                                  "or keyframe text ('0: cyberpunk, 120: volcano')")
    prompt: str | None = Field(None, max_length=2000, description="preset name or free text (if no schedule)")
    size: str | None = Field(None, description="WxH, e.g. 416x224; default: the server's")
    fps: float | None = Field(None, gt=0, le=120, description="frame rate; default: the schedule's, if one is "
                              "given, else the server's")
    seed: int = Field(0, ge=0, le=2**31 - 1)

    @field_validator("size")
    @classmethod
    def _size(cls, v: str | None) -> str | None:
        if v is not None:
            try:
                Size.parse(v)
            except SizeError as exc:
                raise ValueError(exc.detail) from None
        return v


class OfferRequest(SessionOptions):
    """A browser's SDP offer plus the options of the session it starts."""

    sdp: str = Field(min_length=1, max_length=100_000, description="SDP of the offer, with a video m-line")
    type: Literal["offer"] = "offer"
    bitrate: int | None = Field(None, ge=100_000, le=50_000_000, description="video start bitrate, bit/s")
    stamp: bool = Field(False, description="draw the frame index as a bar code (latency measurements)")
    loop: bool = Field(True, description="recorded sources: start again at the end")


class OfferAnswer(BaseModel):
    sdp: str
    type: Literal["answer"] = "answer"
    session_id: str
    owner_key: str | None = Field(None, description="the session's owner key, given to this peer only: every "
                                  "route on the session needs it as Authorization: Bearer KEY")


class SessionInfo(SessionFacts):
    frame: int = Field(description="next timeline frame to render")
    frames_sent: int
    measured_fps: float
    state: str
    codec: str | None = None
    bitrate: int | None = None


class OscTarget(BaseModel):
    """PUT /api/osc: the session OSC steers (null: the newest started with the admin token)."""
    model_config = ConfigDict(extra="forbid")

    session_id: str | None = Field(None, max_length=64)


class Health(BaseModel):
    status: Literal["ok"] = "ok"
    ready: bool = Field(True, description="the start-up warm-up is over: a session now starts without waiting for "
                        "the default renderer, its GL setup or the encoder (SessionPlanner.warm_up)")
    text_matching_ready: bool | None = Field(None, description="free text is matched to presets without loading "
                                             "anything (the matcher's background warm-up is over); null when the "
                                             "server does not warm it up")
    version: str | None = Field(None, description="the studio's version: for the admin token only")
    sessions: int
    max_sessions: int
    renderer: str
    renderers: list[str]
    feeds: list[str]
    renderer_info: dict[str, Any] | None = Field(None, description="the default renderer's own description once "
                                                 "loaded (flash: config, weights, sampler, text_sink, ...)")
    workers: list[dict[str, Any]] | None = Field(None, description="with --cluster: each render worker's name, "
                                                 "state (starting, ready, dead), sessions, capacity, node, cause, "
                                                 "and session_ids: the live sessions it hosts")


class FeedInfo(BaseModel):
    name: str
    source: str
    width: int
    height: int
    fps: float
    frames: int
    subscribers: int


class ErrorBody(BaseModel):
    error: str
    where: str | None = None


Responses = dict[int | str, dict[str, Any]]        # a route's `responses=`, as /docs documents them


class TakeRequest(BaseModel):
    action: Literal["start", "stop"] = Field(description="start or stop recording a take of the session")
