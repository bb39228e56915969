"""Python client for the engine feed over gRPC (the `engines` extra): what gbuffer/feed/client.py's FeedClient is
for the WebSocket, with the same calls, so `stream_source` drives either.

    with GrpcFeedClient("127.0.0.1:50051", name="kart", width=416, height=224, fps=30,
                        output={"prompt": "cyberpunk"}) as client:
        client.welcome.session_id, client.welcome.watch_path     # the session; browsers watch it there
        client.send_frame(frame)
        client.control({"type": "preset", "name": "volcano"})    # → the ack (or error), as on the data channel
        for styled in client.frames():     # StyledFrame: index of the G-buffer frame, .rgb() → (H, W, 3)
            ...

Synchronous on purpose, as engines are loops: gRPC's own thread writes what `send_frame` queues, a background
thread reads what the studio sends (styled frames kept for a slow reader as FeedClient keeps them; player input,
events and the session's messages collected).
"""

from __future__ import annotations

import collections
import json
import queue
import threading
from typing import Iterator, Protocol

import grpc

from alaya_errors import validate
from gbuffer.feed.grpc import engine_feed_pb2 as pb
from gbuffer.feed.grpc import engine_feed_pb2_grpc as rpc
from gbuffer.feed.client import ANSWERS, STYLED_KEPT, ask
from gbuffer.feed.grpc.messages import FORMAT_IDS, FORMATS, frame_message, open_message
from gbuffer.feed.protocol import HELLO, FeedError, StyledFrame
from gbuffer.feed.roundtrip import RoundTrips
from gbuffer.frame import GBufferFrame
from gbuffer.input import PlayerInput, newer_input

_END = object()
SEND_QUEUE = 4          # frames waiting to go out before send_frame blocks (back-pressure, as a socket's buffer)


class _StudioStream(Protocol):
    """What `EngineFeed.Stream` returns on the client: the studio's messages, and a call that can be cancelled.
    (grpc's own type for it is private, and the generated stub is untyped.)"""

    def __iter__(self) -> Iterator[pb.StudioMessage]: ...
    def __next__(self) -> pb.StudioMessage: ...
    def cancel(self) -> bool: ...


def output_message(output: dict) -> pb.OutputRequest:
    """{"renderer", "size": "WxH", "prompt", "schedule", "format": "rgb24"|"jpeg", "quality"} → OutputRequest."""
    fields = dict(output)
    width = height = 0
    if "size" in fields:
        width, height = (int(v) for v in str(fields.pop("size")).lower().split("x"))
    fmt = fields.pop("format", "rgb24")
    if fmt not in FORMAT_IDS:
        raise FeedError(f"{fmt!r} is not one of {', '.join(FORMAT_IDS)}", "output.format")
    return pb.OutputRequest(width=width, height=height, format=FORMAT_IDS[fmt], **fields)


def styled_frame(message: pb.StyledFrame) -> StyledFrame:
    return StyledFrame(message.index, message.width, message.height, FORMATS.get(message.format, "rgb24"),
                       message.data, message.missed, message.render_ms, message.studio_ms)


class GrpcFeedClient:
    def __init__(self, target: str, *, name: str, width: int, height: int, fps: float, token: str | None = None,
                 compression: str = "none", rgb: bool = False, output: dict | None = None):
        self.target = target
        self.hello = validate(HELLO, dict(name=name, width=width, height=height, fps=float(fps),
                                          compression=compression, rgb=rgb), FeedError, "feed client")
        self.output = output_message(output) if output is not None else None
        self.token = token
        self.welcome: pb.Welcome | None = None
        self.events: list[dict] = []
        self.messages: list[dict] = []      # the session's own messages (timeline, preparing, ended, ...)
        self.inputs_received = 0
        self.frames_dropped = 0             # styled frames this client received but nobody read in time
        self.roundtrips = RoundTrips()      # G-buffer frame sent → its styled frame received
        self.close_reason: str | None = None
        self.status: grpc.StatusCode | None = None     # how the studio ended the stream
        self._input: PlayerInput | None = None
        self._styled: collections.deque[StyledFrame] = collections.deque(maxlen=STYLED_KEPT)
        self._answers: queue.SimpleQueue[dict] = queue.SimpleQueue()
        self._asking = threading.Lock()     # one control request at a time: answers come in order
        self._cond = threading.Condition()
        self._outgoing: queue.Queue = queue.Queue(SEND_QUEUE)
        self._channel: grpc.Channel | None = None
        self._call: _StudioStream | None = None
        self._reader: threading.Thread | None = None

    # ---- connecting --------------------------------------------------------------------------------------

    def connect(self) -> pb.Welcome:
        """Open the stream, send Open, wait for the welcome; FeedError with the studio's one line if refused."""
        self._channel = grpc.insecure_channel(self.target, options=[("grpc.max_receive_message_length", -1),
                                                                     ("grpc.max_send_message_length", -1)])
        stub = rpc.EngineFeedStub(self._channel)
        metadata = (("authorization", f"Bearer {self.token}"),) if self.token else None
        self._outgoing.put(open_message(self.hello, self.output))
        call: _StudioStream = stub.Stream(self._requests(), metadata=metadata)
        self._call = call
        try:
            first = next(call)
        except grpc.RpcError as exc:
            reason = self._closed_by(exc)
            self.close()
            if self.status == grpc.StatusCode.UNAVAILABLE and not reason.startswith("studio full"):
                raise FeedError(f"cannot connect to {self.target}: {reason}", "--connect") from None
            raise FeedError(f"the studio refused the feed: {reason}", "--connect") from None
        except StopIteration:
            self.close()
            raise FeedError("the studio ended the stream before its welcome", "--connect") from None
        if first.WhichOneof("kind") != "welcome":
            self.close()
            raise FeedError(f"unexpected answer to open: {first.WhichOneof('kind')}", "--connect")
        self.welcome = first.welcome
        self._reader = threading.Thread(target=self._read, args=(call,), name=f"grpc-feed-{self.hello.name}",
                                        daemon=True)
        self._reader.start()
        return self.welcome

    def _requests(self):
        while (message := self._outgoing.get()) is not _END:
            yield message

    def _read(self, call: _StudioStream) -> None:
        try:
            for message in call:
                kind = message.WhichOneof("kind")
                with self._cond:
                    if kind == "styled":
                        styled = styled_frame(message.styled)
                        self.roundtrips.arrived(styled)
                        self.frames_dropped += len(self._styled) == self._styled.maxlen
                        self._styled.append(styled)
                    elif kind == "input":
                        i = message.input
                        self._input = newer_input(self._input, PlayerInput(i.steer, i.throttle, i.brake, i.reset,
                                                                           i.handbrake))
                        self.inputs_received += 1
                    elif kind == "event":
                        self.events.append({"event": message.event.event, "session_id": message.event.session_id})
                    elif kind == "channel":
                        said = json.loads(message.channel.json)
                        (self._answers.put if said.get("type") in ANSWERS else self.messages.append)(said)
                    self._cond.notify_all()
            self.status = grpc.StatusCode.OK
            self.close_reason = "closed by the studio"
        except grpc.RpcError as exc:
            self._closed_by(exc)
        with self._cond:
            self._cond.notify_all()

    def _closed_by(self, exc: grpc.RpcError) -> str:
        """Note how the studio ended the stream; → the reason."""
        self.status = exc.code()
        self.close_reason = reason = exc.details() or exc.code().name
        return reason

    # ---- the engine's calls ------------------------------------------------------------------------------

    @property
    def connected(self) -> bool:
        return self._call is not None and self.close_reason is None

    def may_reconnect(self) -> bool:
        """stream_source asks: connecting again after the studio went away is the WebSocket client's only."""
        return False

    def send_frame(self, frame: GBufferFrame) -> None:
        if frame.width != self.hello.width or frame.height != self.hello.height:
            raise FeedError(f"frame is {frame.width}x{frame.height}, the open said "
                            f"{self.hello.width}x{self.hello.height}", "feed client")
        message = frame_message(frame, self.hello.compression, self.hello.rgb)
        if self.output is not None:
            self.roundtrips.sent(frame.index)
        self._send(message)

    def control(self, message: dict, timeout: float = 10.0) -> dict | None:
        """One data-channel message for the engine's session (needs `output`; prompt, preset, blend, schedule,
        ...: docs/datachannel.md) → the studio's answer (an ack or an error); None for `key` and `input`."""
        if self.output is None:
            raise FeedError("control messages need the engine's own session: give GrpcFeedClient an output",
                            "feed client")
        return ask(self._asking, lambda: self._send(pb.EngineMessage(control=pb.Control(json=json.dumps(message)))),
                   self._answers, message, timeout)

    def _send(self, message: pb.EngineMessage) -> None:
        while self.connected:
            try:
                self._outgoing.put(message, timeout=0.1)
                return
            except queue.Full:
                continue
        raise FeedError(f"the studio closed the feed: {self.close_reason}", "feed client")

    def take_input(self) -> PlayerInput | None:
        """The newest player input since the last call, or None."""
        with self._cond:
            p, self._input = self._input, None
            return p

    def frames(self, timeout: float | None = None) -> Iterator[StyledFrame]:
        """The styled frames in the order they came, waiting for each, until the stream ends or nothing arrives
        for `timeout` s. A slow reader finds the newest STYLED_KEPT (the older counted in `frames_dropped`; the
        studio's own skips are each frame's `missed`)."""
        while True:
            with self._cond:
                if not self._cond.wait_for(lambda: self._styled or self.close_reason is not None, timeout):
                    return
                if not self._styled:
                    return
                styled = self._styled.popleft()
            yield styled

    # ---- closing -----------------------------------------------------------------------------------------

    def close(self) -> None:
        """Half-close the stream (the studio ends the feed and its session), then wait for the reader."""
        if self._channel is None:
            return
        try:
            self._outgoing.put(_END, timeout=1.0)
        except queue.Full:
            self._cancel()
        if self._reader is not None:
            self._reader.join(timeout=5)
            if self._reader.is_alive():
                self._cancel()
                self._reader.join(timeout=5)
        self._channel.close()
        self._channel = None

    def _cancel(self) -> None:
        if self._call is not None:         # None only when the channel opened but the stream never started
            self._call.cancel()

    def __enter__(self) -> "GrpcFeedClient":
        if self._call is None:
            self.connect()
        return self

    def __exit__(self, *exc) -> None:
        self.close()
