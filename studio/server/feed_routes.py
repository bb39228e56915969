"""The engine feed endpoint: `WS /api/engine/feed` (protocol in gbuffer/feed/protocol.py, docs/feed.md), and
`GET /api/feeds`, the feeds connected now.

Reading and checking frames happens here; a bad message closes this feed only. Inflating a zlib frame (the frame's
header must agree with the hello, checked before inflating) runs in a worker thread so a busy feed never stalls
WebRTC signalling or other sessions (an uncompressed one is one copy). What a stranger could do with the socket is
bounded (issue 42): a web page may open it only from the studio's own origin (studio/server/origins.py), at most
`max_feeds` feeds connect at once, a hello over 1 MiB is refused unread, frames count against the rate cap as
they arrive, and uvicorn keeps at most two unread messages per socket (`websocket_options`). An engine that
says protocol 2 gets its own session (studio/server/engine_link.py) and the return path on the same socket:
styled frames out as binary messages, its control messages answered as text (`ReturnPath`).
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging

from fastapi import APIRouter, WebSocket, WebSocketDisconnect

from alaya_errors import UserError
from gbuffer.feed.messages import Welcome
from gbuffer.feed.meta import decode_meta, is_meta
from gbuffer.feed.protocol import (CLOSE, RETURN_PROTOCOL, FeedError, FeedLimits, Hello, decode_frame,
                                   encode_styled, max_message_bytes, parse_hello)
from gbuffer.feed.source import ToEngine
from studio.server.deps import FeedsDep, GoodbyesDep, ManagerDep, SettingsDep, VisitorsDep
from studio.server.engine_link import EngineLink, OutputRequest, parse_output
from studio.server.models import FeedInfo
from studio.server.origins import origin_allowed
from studio.server.sessions import StudioFull
from studio.server.tasks import cancel_and_wait

log = logging.getLogger("alaya.feed")
router = APIRouter(prefix="/api", tags=["engine feed"])
HELLO_TIMEOUT_S = 5.0
OUTBOX_SIZE = 64
CONTROL_BACKLOG = 32                  # control messages an engine may have waiting for their answers
MAX_HELLO_BYTES = 2**20               # a hello is a few hundred bytes; a schedule in it a few KB


def websocket_options(settings) -> dict:
    """uvicorn's WebSocket settings, for `serve` and tests alike. A message may be one full-size frame; at most two
    wait unread per socket (the default 32 let one socket hold ~1 GB of 1080p frames); no per-message deflate (a
    small compressed message could inflate to the size limit on the event loop); pings find dead engines."""
    limits = FeedLimits(settings.feed_max_pixels, settings.feed_max_fps)
    return {"ws_max_size": max_message_bytes(limits), "ws_max_queue": 2, "ws_per_message_deflate": False,
            "ws_ping_interval": 5.0, "ws_ping_timeout": 10.0}


def token_ok(ws: WebSocket, expected: str | None) -> bool:
    if not expected:
        return True
    auth = ws.headers.get("authorization", "")
    given = auth[7:] if auth.lower().startswith("bearer ") else ws.query_params.get("token", "")
    return hmac.compare_digest(given.encode(), expected.encode())


@router.get("/feeds", response_model=list[FeedInfo])
async def list_feeds(hub: FeedsDep) -> list[FeedInfo]:
    return [FeedInfo(name=f.name, source=f"feed:{f.name}", width=f.hello.width, height=f.hello.height,
                     fps=f.hello.fps, frames=f.frames, subscribers=f.subscribers)
            for f in hub.feeds()]


@router.websocket("/engine/feed")
async def engine_feed(ws: WebSocket, settings: SettingsDep, hub: FeedsDep, manager: ManagerDep,
                      visitors: VisitorsDep, goodbyes: GoodbyesDep) -> None:
    if not origin_allowed(ws.headers.get("origin"), ws.headers.get("host"), settings):
        await ws.close(CLOSE["policy"])   # before the handshake: the page's browser gets a 403
        return
    await ws.accept()
    if hub.connected >= settings.max_feeds:
        await ws.close(CLOSE["full"], f"the studio takes at most {settings.max_feeds} engine feeds at once")
        return
    if not token_ok(ws, settings.token):
        await ws.close(CLOSE["unauthorized"], "a valid token is required (Authorization: Bearer TOKEN)")
        return
    loop = asyncio.get_running_loop()
    outbox: asyncio.Queue[ToEngine] = asyncio.Queue(OUTBOX_SIZE)
    sending = asyncio.Lock()          # text and styled frames go out from two tasks, a message at a time

    def send(message: ToEngine) -> None:  # any thread; the newest input wins if the engine reads slowly
        def put() -> None:
            if outbox.full():
                outbox.get_nowait()
            outbox.put_nowait(message)
        loop.call_soon_threadsafe(put)

    async def pump() -> None:
        while True:
            message = await outbox.get()
            text = json.dumps(message) if isinstance(message, dict) else message.text()
            async with sending:
                await ws.send_text(text)

    feed = link = None
    tasks: list[asyncio.Task] = []
    hub.connected += 1                # counted from the handshake, so slow hellos cannot pass the cap together
    goodbyes.track(ws, sending)       # a studio shutting down closes it with a reason first (goodbye.py)
    try:
        first = await asyncio.wait_for(ws.receive(), HELLO_TIMEOUT_S)
        if first["type"] == "websocket.disconnect":
            return
        raw = first.get("text") if first.get("text") is not None else first.get("bytes")
        if raw is not None and len(raw) > MAX_HELLO_BYTES:
            raise FeedError(f"a hello of {len(raw)} bytes; at most {MAX_HELLO_BYTES}", code=CLOSE["too_big"])
        hello = parse_hello(raw, hub.limits)
        request = _output_request(hello)
        feed = hub.register(hello, send)
        session = {}
        if request is not None:
            link = await _open_link(manager, visitors, settings, feed, request)
            session = link.welcome()
        welcome = Welcome(protocol=hello.protocol, source=f"feed:{hello.name}", max_fps=hub.limits.max_fps,
                          max_pixels=hub.limits.max_pixels, meta=True if hello.meta else None, **session)
        await ws.send_text(welcome.text())
        tasks.append(loop.create_task(pump(), name=f"feed-pump-{hello.name}"))
        controls = None
        if link is not None:
            controls = ReturnPath(link, send, ws, sending)
            tasks += controls.start(hello.name)
        limit = max_message_bytes(hub.limits)
        while True:
            message = await asyncio.wait_for(ws.receive(), settings.feed_idle_timeout_s)
            if message["type"] == "websocket.disconnect":
                break
            data = message.get("bytes")
            if data is None:
                if controls is None:
                    raise FeedError("after the hello, the engine sends binary frames only (control messages "
                                    f"need protocol {RETURN_PROTOCOL})")
                controls.control(message.get("text") or "")
                continue
            if len(data) > limit:
                raise FeedError(f"message of {len(data)} bytes exceeds {limit}", code=CLOSE["too_big"])
            if hello.meta and is_meta(data):  # at most MAX_META_BYTES parsed here, one per frame
                feed.hold_meta(*decode_meta(data))
                continue
            arrived = feed.arrive()
            # an uncompressed frame is one copy (about 0.3 ms at 416x224): here, not a thread hop away
            frame = decode_frame(data, hello) if hello.compression == "none" else \
                await asyncio.to_thread(decode_frame, data, hello)
            feed.push(frame, arrived)
    except FeedError as exc:
        log.info("feed %s closed: %s", feed.name if feed else "?", exc)
        await _close(ws, exc.code, str(exc))
    except UserError as exc:          # the output the hello asked for: renderer, size, schedule
        await _close(ws, CLOSE["bad_request"], str(exc))
    except StudioFull as exc:
        await _close(ws, CLOSE["full"], str(exc))
    except asyncio.TimeoutError:
        await _close(ws, CLOSE["idle"], "no message within the idle timeout")
    except WebSocketDisconnect:
        pass
    finally:
        hub.connected -= 1
        goodbyes.forget(ws)
        for task in tasks:
            await cancel_and_wait(task)
        if feed is not None:
            hub.remove(feed)          # first: it wakes the session's read of the feed
        if link is not None:
            await link.close()


async def _close(ws: WebSocket, code: int, reason: str) -> None:
    try:
        await ws.close(code, reason.encode()[:120].decode(errors="ignore"))
    except RuntimeError:  # already closed
        pass


def _output_request(hello: Hello) -> OutputRequest | None:
    """What a protocol-2 hello asks its session to render; None for a protocol-1 feed (no return path)."""
    return parse_output(hello.output) if hello.returns else None


async def _open_link(manager, visitors, settings, feed, request: OutputRequest) -> EngineLink:
    """The engine's own session, owned by a new visitor whose key only this engine hears (in its welcome)."""
    visitor = visitors.visitor_for(None)
    link = await EngineLink.open(manager, feed, request, visitors.grant(visitor, settings.takes))
    visitors.enroll(visitor)          # only once its session runs (issue 42)
    return link


class ReturnPath:
    """Protocol 2 on one socket: each styled frame out as a binary message; the answers to the engine's control
    messages and the session's own messages out as text, through the feed's outbox."""

    def __init__(self, link: EngineLink, send, ws: WebSocket, sending: asyncio.Lock):
        self.link, self.send, self.ws, self.sending = link, send, ws, sending
        self._controls: asyncio.Queue[str] = asyncio.Queue(CONTROL_BACKLOG)

    def start(self, name: str) -> list[asyncio.Task]:
        loop = asyncio.get_running_loop()
        return [loop.create_task(self._frames(), name=f"feed-frames-{name}"),
                loop.create_task(self._answers(), name=f"feed-answers-{name}"),
                loop.create_task(self._messages(), name=f"feed-messages-{name}")]

    def control(self, text: str) -> None:
        """A text message from the engine (on the receive loop): answered in turn, never read ahead of."""
        if self._controls.full():
            raise FeedError(f"{CONTROL_BACKLOG} control messages are already waiting for their answers",
                            code=CLOSE["rate"])
        self._controls.put_nowait(text)

    async def _frames(self) -> None:
        # one frame in flight: while the engine does not read, this send waits and the link's slot keeps only
        # the newest frame (the next one sent says how many were missed)
        while (frame := await self.link.next_frame()) is not None:
            message = encode_styled(frame)
            async with self.sending:
                await self.ws.send_bytes(message)

    async def _answers(self) -> None:
        while True:
            text = await self._controls.get()
            answer = await self.link.control(text)  # a failing handler answers an error; the feed goes on
            if answer is not None:
                self.send(answer)

    async def _messages(self) -> None:
        while (message := await self.link.next_message()) is not None:
            self.send(message)
