"""The engine feed endpoint: `WS /api/engine/feed` (protocol in gbuffer/feed/protocol.py, docs/feed.md), and
`GET /api/feeds`, the feeds connected now.

Reading and checking frames happens here; a bad message closes this feed only. Decoding (zlib, copying a
frame) runs in a worker thread so a busy feed never stalls WebRTC signalling or other sessions.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging

from fastapi import APIRouter, WebSocket, WebSocketDisconnect

from gbuffer.feed.protocol import CLOSE, FEED_PROTOCOL, FeedError, decode_frame, max_message_bytes, parse_hello
from studio.server.deps import FeedsDep, SettingsDep
from studio.server.models import FeedInfo
from studio.server.tasks import cancel_and_wait

log = logging.getLogger("alaya.feed")
router = APIRouter(prefix="/api", tags=["engine feed"])
HELLO_TIMEOUT_S = 5.0
OUTBOX_SIZE = 64


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
async def engine_feed(ws: WebSocket, settings: SettingsDep, hub: FeedsDep) -> None:
    await ws.accept()
    if not token_ok(ws, settings.token):
        await ws.close(CLOSE["unauthorized"], "a valid token is required (Authorization: Bearer TOKEN)")
        return
    loop = asyncio.get_running_loop()
    outbox: asyncio.Queue[dict] = asyncio.Queue(OUTBOX_SIZE)

    def send(message: dict) -> None:  # any thread; the newest input wins if the engine reads slowly
        def put() -> None:
            if outbox.full():
                outbox.get_nowait()
            outbox.put_nowait(message)
        loop.call_soon_threadsafe(put)

    async def pump() -> None:
        while True:
            await ws.send_text(json.dumps(await outbox.get()))

    feed = None
    pump_task = None
    try:
        first = await asyncio.wait_for(ws.receive(), HELLO_TIMEOUT_S)
        if first["type"] == "websocket.disconnect":
            return
        hello = parse_hello(first.get("text") if first.get("text") is not None else first.get("bytes"),
                            hub.limits)
        feed = hub.register(hello, send)
        await ws.send_text(json.dumps({"type": "welcome", "protocol": FEED_PROTOCOL, "source": f"feed:{hello.name}",
                                       "max_fps": hub.limits.max_fps, "max_pixels": hub.limits.max_pixels}))
        pump_task = asyncio.get_running_loop().create_task(pump(), name=f"feed-pump-{hello.name}")
        limit = max_message_bytes(hub.limits)
        while True:
            message = await asyncio.wait_for(ws.receive(), settings.feed_idle_timeout_s)
            if message["type"] == "websocket.disconnect":
                break
            data = message.get("bytes")
            if data is None:
                raise FeedError("after the hello, the engine sends binary frames only")
            if len(data) > limit:
                raise FeedError(f"message of {len(data)} bytes exceeds {limit}", code=CLOSE["too_big"])
            frame = await asyncio.to_thread(decode_frame, data, hello)
            feed.push(frame)
    except FeedError as exc:
        log.info("feed %s closed: %s", feed.name if feed else "?", exc)
        await _close(ws, exc.code, str(exc))
    except asyncio.TimeoutError:
        await _close(ws, CLOSE["idle"], "no message within the idle timeout")
    except WebSocketDisconnect:
        pass
    finally:
        await cancel_and_wait(pump_task)
        if feed is not None:
            hub.remove(feed)


async def _close(ws: WebSocket, code: int, reason: str) -> None:
    try:
        await ws.close(code, reason.encode()[:120].decode(errors="ignore"))
    except RuntimeError:  # already closed
        pass
