"""The engine feed wire protocol (WebSocket), shared by the server-side feed and the client library.

See docs/feed.md. In short, on one WebSocket:
  engine → studio  text   {"type": "hello", "protocol": 1, "name", "width", "height", "fps", "compression"}
  studio → engine  text   {"type": "welcome", "protocol": 1, "source": "feed:NAME", ...}
  engine → studio  binary FRAME_HEADER + payload, payload = the (5, H, W, 3) uint8 frame in CHANNELS order,
                          raw or zlib-compressed
  studio → engine  text   {"type": "input", "steer", "throttle", "brake", "reset", "handbrake"} and
                          {"type": "event", "event": "session_started" | "session_ended", "session_id"}
A bad message closes the feed with a WebSocket close code from `CLOSE` and a one-line reason.
"""

from __future__ import annotations

import json
import re
import struct
import zlib
from dataclasses import dataclass

import numpy as np

from gbuffer.frame import NUM_CHANNELS, GBufferError, GBufferFrame

FEED_PROTOCOL = 1
FRAME_MAGIC = b"AGBF"
# magic, protocol version, compression id, width, height, frame index, timestamp in microseconds
FRAME_HEADER = struct.Struct("<4sBBHHIq")
COMPRESSION_IDS = {"none": 0, "zlib": 1}
NAME_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")

# WebSocket close codes the studio uses for a feed
CLOSE = {"policy": 1008, "too_big": 1009, "bad_data": 1003, "bad_request": 4400, "unauthorized": 4401,
         "conflict": 4409, "rate": 4429, "idle": 4408}


class FeedError(GBufferError):
    """A feed message that breaks the protocol; `code` is the WebSocket close code to answer with."""

    def __init__(self, message: str, where: str | None = "engine feed", code: int = CLOSE["bad_data"]):
        super().__init__(message, where)
        self.code = code


@dataclass(frozen=True)
class FeedLimits:
    max_pixels: int = 1920 * 1080
    max_fps: float = 120.0


@dataclass(frozen=True)
class Hello:
    name: str
    width: int
    height: int
    fps: float
    compression: str = "none"
    protocol: int = FEED_PROTOCOL

    def to_json(self) -> str:
        return json.dumps({"type": "hello", "protocol": self.protocol, "name": self.name, "width": self.width,
                           "height": self.height, "fps": self.fps, "compression": self.compression})

    @property
    def frame_bytes(self) -> int:
        return NUM_CHANNELS * self.height * self.width * 3


def parse_hello(text: str | bytes, limits: FeedLimits = FeedLimits()) -> Hello:
    """The first message of a feed → Hello, checked against the caps; FeedError otherwise."""
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
    if data.get("protocol") != FEED_PROTOCOL:
        raise FeedError(f"protocol {data.get('protocol')!r} is not supported; this studio speaks {FEED_PROTOCOL}",
                        "hello", CLOSE["bad_request"])
    name = data.get("name")
    if not isinstance(name, str) or not NAME_PATTERN.match(name):
        raise FeedError(f"name {name!r} must be 1-64 letters, digits, '_', '.', '-'", "hello.name",
                        CLOSE["bad_request"])
    width, height, fps = data.get("width"), data.get("height"), data.get("fps")
    for field, value in (("width", width), ("height", height)):
        if not isinstance(value, int) or isinstance(value, bool) or not 8 <= value <= 65535:
            raise FeedError(f"{value!r} is not a size in pixels (8..65535)", f"hello.{field}", CLOSE["bad_request"])
    if width * height > limits.max_pixels:
        raise FeedError(f"{width}x{height} exceeds the cap of {limits.max_pixels} pixels", "hello",
                        CLOSE["too_big"])
    if not isinstance(fps, (int, float)) or isinstance(fps, bool) or not 0 < fps <= limits.max_fps:
        raise FeedError(f"{fps!r} is not a frame rate in (0, {limits.max_fps:g}]", "hello.fps",
                        CLOSE["bad_request"])
    compression = data.get("compression", "none")
    if compression not in COMPRESSION_IDS:
        raise FeedError(f"compression {compression!r} is not one of {', '.join(COMPRESSION_IDS)}",
                        "hello.compression", CLOSE["bad_request"])
    return Hello(name, width, height, float(fps), compression)


def encode_frame(frame: GBufferFrame, compression: str = "none") -> bytes:
    header = FRAME_HEADER.pack(FRAME_MAGIC, FEED_PROTOCOL, COMPRESSION_IDS[compression], frame.width,
                               frame.height, frame.index % 2**32, round(frame.timestamp * 1e6))
    payload = np.ascontiguousarray(frame.data).tobytes()
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
    payload = memoryview(message)[FRAME_HEADER.size:]
    expected = hello.frame_bytes
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
        raise FeedError(f"payload has {len(raw)} bytes; a {width}x{height} frame has {expected}")
    data = np.frombuffer(raw, dtype=np.uint8).reshape(NUM_CHANNELS, height, width, 3).copy()
    return GBufferFrame(index, ts_us / 1e6, data, {"source": f"feed:{hello.name}"})


def max_message_bytes(limits: FeedLimits) -> int:
    """Largest acceptable WebSocket message: one uncompressed frame at the pixel cap plus the header."""
    return FRAME_HEADER.size + NUM_CHANNELS * limits.max_pixels * 3 + 1024
