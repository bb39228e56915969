"""The gRPC feed's messages (engine_feed.proto) to and from the feed's own types: `Open` is the WebSocket
hello (checked by the same model and caps, gbuffer/feed/protocol.py), `Frame` a GBufferFrame channel by channel.

Errors are FeedErrors whose one line names the proto field (`open.width`, `frame.gbuffer.depth`); the server
turns them into INVALID_ARGUMENT (or the status their close code stands for).
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Mapping
from dataclasses import asdict
from typing import Any, TypeVar

import numpy as np

from gbuffer.feed.grpc import engine_feed_pb2 as pb
from gbuffer.feed.meta import meta_json, parse_meta
from gbuffer.feed.protocol import CLOSE, FEED_PROTOCOL, FeedError, FeedLimits, Hello, StyledFormat, parse_hello
from gbuffer.frame import CHANNELS, GBufferFrame
from gbuffer.input import PlayerInput

COMPRESSIONS: dict[pb.Compression, str] = {pb.COMPRESSION_NONE: "none", pb.COMPRESSION_ZLIB: "zlib"}
COMPRESSION_IDS = {name: number for number, name in COMPRESSIONS.items()}
FORMATS: dict[pb.Format, StyledFormat] = {pb.FORMAT_RGB24: "rgb24", pb.FORMAT_JPEG: "jpeg"}
FORMAT_IDS = {name: number for number, name in FORMATS.items()}

Enum = TypeVar("Enum", bound=int)        # a proto enum (an int subclass in the generated stubs)
Name = TypeVar("Name", bound=str)


def enum_name(table: Mapping[Enum, Name], value: Enum, field: str) -> Name:
    """A proto3 enum arrives as whatever number the sender wrote: a number outside the table is one line."""
    if value not in table:
        raise FeedError(f"{value} is not one of {', '.join(f'{n} ({s})' for n, s in table.items())}", field,
                        CLOSE["bad_request"])
    return table[value]


# ---- Open ----------------------------------------------------------------------------------------------------

def open_message(hello: Hello, output: pb.OutputRequest | None = None) -> pb.EngineMessage:
    return pb.EngineMessage(open=pb.Open(name=hello.name, width=hello.width, height=hello.height, fps=hello.fps,
                                         compression=COMPRESSION_IDS[hello.compression], rgb=hello.rgb,
                                         output=output))


def parse_open(message: pb.Open, limits: FeedLimits = FeedLimits()) -> Hello:
    """`Open` → the feed's Hello, by the WebSocket hello's own checks (names the field as `open.FIELD`)."""
    compression = enum_name(COMPRESSIONS, message.compression, "open.compression")
    hello = {"type": "hello", "protocol": FEED_PROTOCOL, "name": message.name, "width": message.width,
             "height": message.height, "fps": message.fps, "compression": compression, "rgb": message.rgb}
    try:
        return parse_hello(json.dumps(hello), limits)
    except FeedError as exc:       # the hello's words, with the proto's name for the message
        raise FeedError(str(exc).replace("hello", "open", 1), None, exc.code) from None


def output_request(message: pb.OutputRequest) -> dict:
    """`Open.output` as the hello's `output` object (what the return path parses); unset fields are left out."""
    fields = {"renderer": message.renderer, "prompt": message.prompt, "schedule": message.schedule,
              "quality": message.quality}
    request = {k: v for k, v in fields.items() if v}
    if message.width or message.height:
        request["size"] = f"{message.width}x{message.height}"
    request["format"] = enum_name(FORMATS, message.format, "output.format")
    return request


# ---- Frame ---------------------------------------------------------------------------------------------------

def frame_message(frame: GBufferFrame, compression: str = "none", rgb: bool = False) -> pb.EngineMessage:
    """One GBufferFrame as a `Frame`; with `rgb` (a paired feed) its RGB image too."""
    pack = zlib.compress if compression == "zlib" else bytes
    channels = {name: pack(np.ascontiguousarray(frame.data[i]).tobytes()) for i, name in enumerate(CHANNELS)}
    message = pb.Frame(index=frame.index, timestamp_us=round(frame.timestamp * 1e6),
                       gbuffer=pb.GBuffer(**channels))
    if rgb:
        if frame.rgb is None:
            raise FeedError(f"frame {frame.index} has no rgb image but the feed was opened with rgb", "feed client")
        message.rgb = pack(np.ascontiguousarray(frame.rgb).tobytes())
    meta = meta_json(frame.meta)
    if meta is not None:
        message.meta_json = meta
    return pb.EngineMessage(frame=message)


def _image(data: bytes, hello: Hello, field: str) -> np.ndarray:
    """One (H, W, 3) plane of a frame; zlib planes inflate with a cap of one plane (a bomb costs nothing)."""
    expected = hello.width * hello.height * 3
    if hello.compression == "zlib":
        inflater = zlib.decompressobj()
        try:
            data = inflater.decompress(data, expected + 1)
        except zlib.error as exc:
            raise FeedError(f"zlib data is corrupt ({exc})", field) from None
        if len(data) > expected or inflater.unconsumed_tail:
            raise FeedError(f"inflates beyond one {hello.width}x{hello.height} plane", field, CLOSE["too_big"])
    if len(data) != expected:
        raise FeedError(f"{len(data)} bytes; a {hello.width}x{hello.height} plane (H, W, 3) has {expected}", field)
    return np.frombuffer(data, np.uint8).reshape(hello.height, hello.width, 3)


def parse_frame(message: pb.Frame, hello: Hello) -> GBufferFrame:
    """`Frame` → GBufferFrame at the feed's size; FeedError naming the field otherwise."""
    if not message.HasField("gbuffer"):
        raise FeedError("missing", f"frame {message.index}: frame.gbuffer")
    planes = [_image(getattr(message.gbuffer, name), hello, f"frame {message.index}: frame.gbuffer.{name}")
              for name in CHANNELS]
    rgb = None
    if hello.rgb:
        rgb = _image(message.rgb, hello, f"frame {message.index}: frame.rgb").copy()
    elif message.rgb:
        raise FeedError("set, but the feed was opened without rgb", f"frame {message.index}: frame.rgb")
    meta: dict[str, Any] = {}
    if message.meta_json:                   # the engine's own entries; the studio's (source, input) win
        meta.update(parse_meta(message.meta_json, message.index))
    meta["source"] = f"feed:{hello.name}"
    if message.HasField("input"):
        i = message.input
        meta["input"] = asdict(PlayerInput(i.steer, i.throttle, i.brake, i.reset, i.handbrake).clamped())
    return GBufferFrame(message.index, message.timestamp_us / 1e6, np.stack(planes), meta, rgb)
