"""The engine feed wire protocol (WebSocket), shared by the server-side feed and the client library.

See docs/feed.md. In short, on one WebSocket:
  engine → studio  text   {"type": "hello", "protocol": 1, "name", "width", "height", "fps", "compression",
                                "rgb": false}
  studio → engine  text   {"type": "welcome", "protocol": 1, "source": "feed:NAME", ...}
  engine → studio  binary FRAME_HEADER + payload, payload = the (5, H, W, 3) uint8 frame in CHANNELS order,
                          followed (when the hello said "rgb": true) by the frame's paired (H, W, 3) RGB image,
                          raw or zlib-compressed together
  studio → engine  text   {"type": "input", "steer", "throttle", "brake", "reset", "handbrake"} and
                          {"type": "event", "event": "session_started" | "session_ended", "session_id"}
A bad message closes the feed with a WebSocket close code from `CLOSE` and a one-line reason.

Protocol 2 (the return path) adds, on the same socket: an `output` object in the hello (what the engine's own
session renders), its session's id, owner key and watch link in the welcome, each styled frame back as a binary
message (STYLED_HEADER + pixels, `StyledFrame`), and the data channel's control messages as text both ways.
"""

from __future__ import annotations

import json
import re
import struct
import zlib
from dataclasses import dataclass
from typing import Annotated, Any, Literal

import numpy as np
from pydantic import ConfigDict, Field, Strict, StrictBool, StrictInt, StringConstraints, TypeAdapter
from pydantic.dataclasses import dataclass as model_dataclass

from alaya_errors import validate
from gbuffer.frame import NUM_CHANNELS, GBufferError, GBufferFrame

FEED_PROTOCOL: Literal[1] = 1
RETURN_PROTOCOL: Literal[2] = 2      # the hello may ask for its session's styled frames back
ProtocolVersion = Literal[1, 2]      # FEED_PROTOCOL or RETURN_PROTOCOL (a Literal takes values, not names)
PROTOCOLS: tuple[ProtocolVersion, ...] = (FEED_PROTOCOL, RETURN_PROTOCOL)
FRAME_MAGIC = b"AGBF"
# magic, protocol version, compression id, width, height, frame index, timestamp in microseconds
FRAME_HEADER = struct.Struct("<4sBBHHIq")
COMPRESSION_IDS = {"none": 0, "zlib": 1}
STYLED_MAGIC = b"ASTY"
# magic, protocol version, format id, width, height, G-buffer frame index, frames missed, render time and time in
# the studio in microseconds
STYLED_HEADER = struct.Struct("<4sBBHHIIII")
StyledFormat = Literal["rgb24", "jpeg"]
FORMAT_IDS: dict[StyledFormat, int] = {"rgb24": 0, "jpeg": 1}
FORMATS: dict[int, StyledFormat] = {v: k for k, v in FORMAT_IDS.items()}
NAME_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")

# WebSocket close codes the studio uses for a feed
CLOSE = {"policy": 1008, "too_big": 1009, "bad_data": 1003, "bad_request": 4400, "unauthorized": 4401,
         "conflict": 4409, "rate": 4429, "idle": 4408, "full": 1013, "restart": 1012}


class FeedError(GBufferError):
    """A feed message that breaks the protocol; `code` is the WebSocket close code to answer with."""

    def __init__(self, message: str, where: str | None = "engine feed", code: int = CLOSE["bad_data"]):
        super().__init__(message, where)
        self.code = code


@dataclass(frozen=True)
class FeedLimits:
    max_pixels: int = 1920 * 1080
    max_fps: float = 120.0


Side = Annotated[StrictInt, Field(ge=8, le=65535, description="pixels")]


@model_dataclass(frozen=True, config=ConfigDict(extra="ignore"))
class Hello:
    """The feed's first message (validated field by field; the caps in FeedLimits are checked after)."""

    name: Annotated[str, StringConstraints(pattern=NAME_PATTERN.pattern)]
    width: Side
    height: Side
    fps: Annotated[float, Strict(), Field(gt=0, allow_inf_nan=False)] | Annotated[StrictInt, Field(gt=0)]
    compression: Literal["none", "zlib"] = "none"
    protocol: ProtocolVersion = FEED_PROTOCOL
    rgb: StrictBool = False          # each frame payload also carries the paired RGB image
    meta: StrictBool = False         # frames may come after a meta message (gbuffer/feed/meta.py)
    # protocol 2: what the engine's own session renders and sends back (the studio checks its fields)
    output: dict[str, Any] | None = None

    def to_json(self) -> str:
        hello: dict[str, Any] = {"type": "hello", "protocol": self.protocol, "name": self.name, "width": self.width,
                                 "height": self.height, "fps": self.fps, "compression": self.compression,
                                 "rgb": self.rgb}
        if self.meta:
            hello["meta"] = True
        if self.output is not None:
            hello["output"] = self.output
        return json.dumps(hello)

    @property
    def returns(self) -> bool:
        """The engine asked for its styled frames back (protocol 2)."""
        return self.protocol == RETURN_PROTOCOL

    @property
    def gbuffer_bytes(self) -> int:
        return NUM_CHANNELS * self.height * self.width * 3

    @property
    def frame_bytes(self) -> int:
        """Bytes of one uncompressed payload: the G-buffer, then the RGB image if the feed is paired."""
        return self.gbuffer_bytes + (self.height * self.width * 3 if self.rgb else 0)


HELLO = TypeAdapter(Hello)


def _hello_error(message: str, _where: str | None) -> FeedError:
    return FeedError(f"hello.{message}", None, CLOSE["bad_request"])


def parse_hello(text: str | bytes | None, limits: FeedLimits = FeedLimits()) -> Hello:
    """The first message of a feed → Hello, checked against the caps; FeedError otherwise."""
    if text is None:          # a websocket message with neither text nor bytes
        raise FeedError("the first message must be the JSON hello, got an empty message", "hello",
                        CLOSE["bad_request"])
    if isinstance(text, bytes):
        raise FeedError("the first message must be the JSON hello, got binary data", "hello", CLOSE["bad_request"])
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise FeedError(f"not JSON ({exc.msg})", "hello", CLOSE["bad_request"]) from None
    except RecursionError:  # json's C parser recurses per nesting level
        raise FeedError("JSON nested too deeply", "hello", CLOSE["bad_request"]) from None
    if not isinstance(data, dict) or data.get("type") != "hello":
        raise FeedError("the first message must be {\"type\": \"hello\", ...}", "hello", CLOSE["bad_request"])
    version = data.get("protocol")
    if isinstance(version, bool) or version not in PROTOCOLS:
        raise FeedError(f"protocol {version!r} is not supported; this studio speaks "
                        f"{' and '.join(map(str, PROTOCOLS))}", "hello", CLOSE["bad_request"])
    if version == FEED_PROTOCOL and "output" in data:
        raise FeedError(f"'output' needs protocol {RETURN_PROTOCOL} (the return path); this hello says "
                        f"{FEED_PROTOCOL}", "hello.output", CLOSE["bad_request"])
    hello = validate(HELLO, {k: v for k, v in data.items() if k != "type"}, _hello_error)
    if hello.width * hello.height > limits.max_pixels:
        raise FeedError(f"{hello.width}x{hello.height} exceeds the cap of {limits.max_pixels} pixels", "hello",
                        CLOSE["too_big"])
    if hello.fps > limits.max_fps:
        raise FeedError(f"{hello.fps!r} is not a frame rate in (0, {limits.max_fps:g}]", "hello.fps",
                        CLOSE["bad_request"])
    return Hello(hello.name, hello.width, hello.height, float(hello.fps), hello.compression, hello.protocol,
                 hello.rgb, hello.meta, hello.output if hello.returns else None)


def encode_frame(frame: GBufferFrame, compression: str = "none", rgb: bool = False) -> bytes:
    """One binary feed message; with `rgb` (a paired feed) the frame's RGB image follows the G-buffer."""
    header = FRAME_HEADER.pack(FRAME_MAGIC, FEED_PROTOCOL, COMPRESSION_IDS[compression], frame.width,
                               frame.height, frame.index % 2**32, round(frame.timestamp * 1e6))
    payload = np.ascontiguousarray(frame.data).tobytes()
    if rgb:
        if frame.rgb is None:
            raise FeedError(f"frame {frame.index} has no rgb image but the hello said rgb", "feed client")
        payload += np.ascontiguousarray(frame.rgb).tobytes()
    if compression == "zlib":
        payload = zlib.compress(payload, 1)
    return header + payload


def decode_frame(message: bytes, hello: Hello) -> GBufferFrame:
    """One binary feed message → GBufferFrame at the hello's size; FeedError on anything else.

    zlib payloads are inflated with a cap of one frame, so a compression bomb costs nothing."""
    if len(message) < FRAME_HEADER.size:
        raise FeedError(f"frame message of {len(message)} bytes is shorter than its {FRAME_HEADER.size}-byte header")
    magic, version, compression, width, height, index, ts_us = FRAME_HEADER.unpack_from(message)
    if magic != FRAME_MAGIC or version != FEED_PROTOCOL:
        raise FeedError(f"bad frame header (magic {magic!r}, version {version})")
    if (width, height) != (hello.width, hello.height):
        raise FeedError(f"frame is {width}x{height} but the hello said {hello.width}x{hello.height}",
                        code=CLOSE["bad_data"])
    named = {v: k for k, v in COMPRESSION_IDS.items()}.get(compression)
    if named is None:
        raise FeedError(f"unknown compression id {compression}")
    # the studio picks where to decode (in place or on a thread) from the hello, so a frame that lies about
    # its compression is refused before anything is inflated
    if named != hello.compression:
        raise FeedError(f"frame {index}: frame header says {named} but the hello said {hello.compression}",
                        code=CLOSE["bad_data"])
    payload = memoryview(message)[FRAME_HEADER.size:]
    expected = hello.frame_bytes
    raw: bytes | memoryview
    if compression == COMPRESSION_IDS["zlib"]:
        inflater = zlib.decompressobj()
        try:
            raw = inflater.decompress(payload, expected + 1)
        except zlib.error as exc:
            raise FeedError(f"zlib payload is corrupt ({exc})") from None
        if len(raw) > expected or inflater.unconsumed_tail:
            raise FeedError(f"zlib payload inflates beyond one {width}x{height} frame", code=CLOSE["too_big"])
    elif compression == COMPRESSION_IDS["none"]:
        raw = payload
    else:
        raise FeedError(f"unknown compression id {compression}")
    if len(raw) != expected:
        paired = " with its rgb image" if hello.rgb else ""
        raise FeedError(f"frame {index}: payload has {len(raw)} bytes; a {width}x{height} frame{paired} has "
                        f"{expected}")
    flat = np.frombuffer(raw, dtype=np.uint8)
    data = flat[: hello.gbuffer_bytes].reshape(NUM_CHANNELS, height, width, 3).copy()
    rgb = flat[hello.gbuffer_bytes:].reshape(height, width, 3).copy() if hello.rgb else None
    return GBufferFrame(index, ts_us / 1e6, data, {"source": f"feed:{hello.name}"}, rgb)


def max_message_bytes(limits: FeedLimits) -> int:
    """Largest acceptable WebSocket message: one uncompressed paired frame at the pixel cap plus the header."""
    return FRAME_HEADER.size + (NUM_CHANNELS + 1) * limits.max_pixels * 3 + 1024


@dataclass(frozen=True)
class StyledFrame:
    """A styled frame on its way back to the engine that sent its G-buffer (protocol 2).

    `index`: the index of the G-buffer frame it was rendered from (as the engine numbered it); `data`: `height *
    width * 3` RGB bytes rows top first (rgb24), or a JPEG file (jpeg); `missed`: frames the studio rendered for
    this engine since the last one it read and dropped (latest frame wins); `render_ms`: the renderer's time for
    the chunk it came from; `studio_ms`: from the G-buffer frame read off the engine's connection to this frame
    ready to go back (render included), so an engine can tell the studio's share of a round trip from the wire's."""

    index: int
    width: int
    height: int
    format: StyledFormat
    data: bytes
    missed: int = 0
    render_ms: float = 0.0
    studio_ms: float = 0.0

    def rgb(self) -> np.ndarray:
        """uint8 (H, W, 3)."""
        if self.format == "rgb24":
            return np.frombuffer(self.data, np.uint8).reshape(self.height, self.width, 3)
        from io import BytesIO

        from PIL import Image

        with Image.open(BytesIO(self.data)) as image:
            return np.asarray(image.convert("RGB"))


def encode_styled(frame: StyledFrame) -> bytes:
    header = STYLED_HEADER.pack(STYLED_MAGIC, RETURN_PROTOCOL, FORMAT_IDS[frame.format], frame.width, frame.height,
                                frame.index % 2**32, min(frame.missed, 2**32 - 1),
                                _micros(frame.render_ms), _micros(frame.studio_ms))
    return header + frame.data


def decode_styled(message: bytes) -> StyledFrame:
    """One binary message from the studio (protocol 2) → StyledFrame; FeedError on anything else."""
    if len(message) < STYLED_HEADER.size:
        raise FeedError(f"styled frame of {len(message)} bytes is shorter than its {STYLED_HEADER.size}-byte "
                        "header", "feed client")
    magic, version, fmt, width, height, index, missed, render_us, studio_us = STYLED_HEADER.unpack_from(message)
    if magic != STYLED_MAGIC or version != RETURN_PROTOCOL or fmt not in FORMATS:
        raise FeedError(f"bad styled frame header (magic {magic!r}, version {version}, format {fmt})",
                        "feed client")
    data = bytes(memoryview(message)[STYLED_HEADER.size:])
    if fmt == FORMAT_IDS["rgb24"] and len(data) != width * height * 3:
        raise FeedError(f"styled frame {index}: {len(data)} bytes for a {width}x{height} rgb24 image",
                        "feed client")
    return StyledFrame(index, width, height, FORMATS[fmt], data, missed, render_us / 1e3, studio_us / 1e3)


def _micros(ms: float) -> int:
    return max(0, min(round(ms * 1e3), 2**32 - 1))
