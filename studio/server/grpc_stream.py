"""One engine's `Stream` call (studio/server/grpc_service.py): its feed, and with `Open.output` its session's
link (studio/server/engine_link.py), and what runs while it lasts:
- the reader: frames into the feed (checked and stacked; zlib planes inflated in a worker thread, as the
  WebSocket route does), control messages to the link in the order sent;
- the pumps: the link's styled frames and the session's channel messages out;
- the writer (the call's own generator): `Outgoing`, control traffic first, one styled frame at a time.
A failed check ends this call with its status and one line; nothing else notices.
"""

from __future__ import annotations

import asyncio
import collections
import json

import grpc

from alaya_errors import UserError
from gbuffer.feed.grpc import engine_feed_pb2 as pb
from gbuffer.feed.grpc.messages import FORMAT_IDS, output_request, parse_frame
from gbuffer.feed.messages import EngineInput, SessionEvent
from gbuffer.feed.protocol import CLOSE, FeedError, Hello, StyledFrame
from gbuffer.feed.source import Feed, ToEngine
from gbuffer.input import PlayerInput
from studio.server.engine_link import EngineLink, parse_output
from studio.server.feed_routes import CONTROL_BACKLOG, HELLO_TIMEOUT_S, OUTBOX_SIZE
from studio.server.sessions import StudioFull

STATUS = {CLOSE["bad_request"]: grpc.StatusCode.INVALID_ARGUMENT, CLOSE["bad_data"]: grpc.StatusCode.INVALID_ARGUMENT,
          CLOSE["too_big"]: grpc.StatusCode.INVALID_ARGUMENT, CLOSE["conflict"]: grpc.StatusCode.ALREADY_EXISTS,
          CLOSE["rate"]: grpc.StatusCode.RESOURCE_EXHAUSTED, CLOSE["idle"]: grpc.StatusCode.DEADLINE_EXCEEDED,
          CLOSE["unauthorized"]: grpc.StatusCode.UNAUTHENTICATED, CLOSE["full"]: grpc.StatusCode.UNAVAILABLE}


class StreamFailed(Exception):
    """What ends a stream early: its status and one line."""

    def __init__(self, code: grpc.StatusCode, line: str):
        super().__init__(line)
        self.code, self.line = code, line

    @classmethod
    def of(cls, exc: FeedError) -> "StreamFailed":
        return cls(STATUS.get(exc.code, grpc.StatusCode.INVALID_ARGUMENT), str(exc))


class Outgoing:
    """What one stream sends, in the order the writer takes it: control traffic (player input, events, channel
    messages; the oldest dropped past OUTBOX_SIZE, as on the WebSocket) before styled frames (one waits at a
    time: the link keeps only the newest and counts the rest as missed), until the stream finishes or fails."""

    def __init__(self, loop: asyncio.AbstractEventLoop):
        self.loop = loop
        self.control: collections.deque[pb.StudioMessage] = collections.deque(maxlen=OUTBOX_SIZE)
        self.styled: asyncio.Queue[pb.StudioMessage] = asyncio.Queue(1)
        self.failure: StreamFailed | None = None
        self.finished = False
        self._wake = asyncio.Event()

    def send(self, message: ToEngine) -> None:
        """The feed's back-channel (Feed.send), from any thread."""
        self.loop.call_soon_threadsafe(self.put, feed_message(message))

    def put(self, message: pb.StudioMessage) -> None:
        self.control.append(message)
        self._wake.set()

    async def put_styled(self, message: pb.StudioMessage) -> None:
        await self.styled.put(message)
        self._wake.set()

    def fail(self, failure: StreamFailed) -> None:
        self.failure = self.failure or failure
        self._wake.set()

    def finish(self) -> None:
        self.finished = True
        self._wake.set()

    async def next(self) -> pb.StudioMessage | None:
        """The next message to write; None once the stream is done; raises the failure that ended it."""
        while True:
            if self.failure is not None:
                raise self.failure
            if self.control:
                return self.control.popleft()
            if not self.styled.empty():
                return self.styled.get_nowait()
            if self.finished:
                return None
            self._wake.clear()
            await self._wake.wait()


def feed_message(message: ToEngine) -> pb.StudioMessage:
    """A feed back-channel message (gbuffer/feed/source.py: input, event; a data-channel dict) as a
    StudioMessage."""
    if isinstance(message, EngineInput):
        p = PlayerInput(message.steer, message.throttle, message.brake, message.reset, message.handbrake)
        return pb.StudioMessage(input=pb.PlayerInput(steer=p.steer, throttle=p.throttle, brake=p.brake,
                                                     reset=p.reset, handbrake=p.handbrake))
    if isinstance(message, SessionEvent):
        return pb.StudioMessage(event=pb.Event(event=message.event, session_id=message.session_id))
    return channel_message(message)


def channel_message(message: dict) -> pb.StudioMessage:
    return pb.StudioMessage(channel=pb.ChannelMessage(json=json.dumps(message)))


def styled_message(frame: StyledFrame) -> pb.StudioMessage:
    return pb.StudioMessage(styled=pb.StyledFrame(index=frame.index, width=frame.width, height=frame.height,
                                                  format=FORMAT_IDS[frame.format], data=frame.data,
                                                  missed=frame.missed, render_ms=frame.render_ms,
                                                  studio_ms=frame.studio_ms))


async def first_open(incoming) -> pb.Open:
    """The stream's first message, which must be Open."""
    try:
        first = await asyncio.wait_for(anext(incoming), HELLO_TIMEOUT_S)
    except StopAsyncIteration:
        raise FeedError("the stream ended before its open message", "open", CLOSE["bad_request"]) from None
    except asyncio.TimeoutError:
        raise StreamFailed(grpc.StatusCode.DEADLINE_EXCEEDED,
                           f"open: none within {HELLO_TIMEOUT_S:g} s of the call") from None
    kind = first.WhichOneof("kind")
    if kind != "open":
        raise FeedError(f"the first message must be open, got {kind or 'an empty message'}", "open",
                        CLOSE["bad_request"])
    return first.open


async def open_link(manager, visitors, settings, feed: Feed, output: pb.OutputRequest) -> EngineLink:
    """The engine's own session on its feed, for a new visitor (its owner key goes back in the welcome)."""
    try:
        request = parse_output(output_request(output))
        visitor = visitors.visitor_for(None)
        link = await EngineLink.open(manager, feed, request, visitors.grant(visitor, settings.takes))
        visitors.enroll(visitor)      # only once its session runs (issue 42)
        return link
    except StudioFull as exc:       # every session slot is taken: try again later
        raise StreamFailed(grpc.StatusCode.UNAVAILABLE, str(exc)) from None
    except UserError as exc:        # named from the output request down: open.output.size, open.output: renderer
        line = str(exc) if str(exc).startswith("output") else f"output: {exc}"
        raise FeedError(f"open.{line}", None, CLOSE["bad_request"]) from None


def welcome(hello: Hello, limits, link: EngineLink | None) -> pb.StudioMessage:
    message = pb.Welcome(source=f"feed:{hello.name}", limits=pb.Limits(max_fps=limits.max_fps,
                                                                       max_pixels=limits.max_pixels))
    if link is not None:
        w = link.welcome()
        message.MergeFrom(pb.Welcome(session_id=w["session_id"], owner_key=w["owner_key"], watch_path=w["watch"],
                                     watch_key=w["watch_key"], renderer=w["renderer"], width=w["width"],
                                     height=w["height"], format=FORMAT_IDS[w["format"]]))
    return pb.StudioMessage(welcome=message)


class EngineStream:
    """The reader and pumps of one stream (the call's generator in grpc_service.py writes `out`)."""

    def __init__(self, hello: Hello, feed: Feed, link: EngineLink | None, out: Outgoing, idle_timeout_s: float):
        self.hello, self.feed, self.link, self.out = hello, feed, link, out
        self.idle_timeout_s = idle_timeout_s
        self._controls: asyncio.Queue[str] = asyncio.Queue(CONTROL_BACKLOG)

    async def read(self, incoming) -> None:
        """Until the engine half-closes, fails a check, or goes silent."""
        try:
            while True:
                try:
                    message = await asyncio.wait_for(anext(incoming), self.idle_timeout_s)
                except StopAsyncIteration:
                    self.out.finish()
                    return
                kind = message.WhichOneof("kind")
                if kind == "frame":     # raw planes are one copy (about 0.3 ms at 416x224): here; zlib in a thread
                    frame = parse_frame(message.frame, self.hello) if self.hello.compression == "none" else \
                        await asyncio.to_thread(parse_frame, message.frame, self.hello)
                    self.feed.push(frame)
                elif kind == "control":
                    if self.link is None:
                        raise FeedError("needs open.output: a feed without its own session has nothing to "
                                        "control", "control", CLOSE["bad_request"])
                    if self._controls.full():
                        raise FeedError(f"{CONTROL_BACKLOG} control messages are already waiting for their "
                                        "answers", "control", CLOSE["rate"])
                    self._controls.put_nowait(message.control.json)
                elif kind == "open":
                    raise FeedError("sent twice: open comes once, first", "open", CLOSE["bad_request"])
                else:
                    raise FeedError("empty message: set one of open, frame, control", "message")
        except FeedError as exc:
            self.out.fail(StreamFailed.of(exc))
        except asyncio.TimeoutError:
            self.out.fail(StreamFailed(grpc.StatusCode.DEADLINE_EXCEEDED,
                                       f"no message within the idle timeout ({self.idle_timeout_s:g} s)"))
        except grpc.aio.AioRpcError:      # the call went away under the reader: the writer hears it too
            self.out.finish()

    @property
    def _link(self) -> EngineLink:
        """The session's link, for the pumps below (they run only for a stream that opened one)."""
        assert self.link is not None, "a pump of a stream without its own session"
        return self.link

    async def control(self) -> None:
        """Control messages to the session one at a time, in the order sent; each answer goes out in turn."""
        while True:
            text = await self._controls.get()
            answer = await self._link.control(text)  # a failing handler answers an error; the stream goes on
            if answer is not None:
                self.out.put(channel_message(answer))

    async def styled(self) -> None:
        """The link's styled frames until the session ends; then the stream ends too."""
        while (frame := await self._link.next_frame()) is not None:
            await self.out.put_styled(styled_message(frame))
        self.out.finish()

    async def messages(self) -> None:
        """What the session says of its own accord (timeline changes, a take stopped, `ended`)."""
        while (message := await self._link.next_message()) is not None:
            self.out.put(channel_message(message))
