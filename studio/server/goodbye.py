"""The studio's goodbye to its engine feeds as it shuts down: a close with a reason that reaches the engine.

uvicorn's own shutdown writes a 1012 close frame and closes the socket in the same breath. An engine that is still
streaming frames has bytes the studio never read in its receive buffer, so the kernel answers the close with a
reset, and that reset can reach the engine before the close frame does: the engine then reports "the connection was
lost (1006)" instead of "the studio is restarting (1012)" (a CI run of 2026-12-07 saw it once in 1244 tests).
So the studio closes each feed itself first, through the app, which keeps reading until the engine echoes the close
(the WebSocket closing handshake), and waits for those connections to end before uvicorn's shutdown goes on.
"""

from __future__ import annotations

import asyncio
import time

import uvicorn
from starlette.websockets import WebSocket

from gbuffer.feed.protocol import CLOSE

GOODBYE_S = 3.0                       # the most a shutdown waits for engines to echo the studio's close
RESTART_CODE, RESTART_REASON = CLOSE["restart"], "the studio is shutting down or restarting"


class Goodbyes:
    """The open engine-feed sockets, each with the lock its sends take, so a close never lands mid-frame."""

    def __init__(self) -> None:
        self._open: dict[WebSocket, asyncio.Lock] = {}

    def track(self, ws: WebSocket, sending: asyncio.Lock) -> None:
        self._open[ws] = sending

    def forget(self, ws: WebSocket) -> None:
        self._open.pop(ws, None)

    async def say(self, deadline: float) -> set[tuple[str, int]]:
        """Close every tracked socket with 1012 and the reason; the client addresses of those it closed."""
        closed = set()
        for ws, sending in list(self._open.items()):
            try:   # a send stuck on an engine that stopped reading keeps its lock: uvicorn's close follows
                await asyncio.wait_for(sending.acquire(), max(0.0, deadline - time.monotonic()))
            except asyncio.TimeoutError:
                continue
            try:
                await ws.close(RESTART_CODE, RESTART_REASON)
                if ws.client is not None:
                    closed.add((ws.client.host, ws.client.port))
            except RuntimeError:      # the feed had already closed
                pass
            finally:
                sending.release()
        return closed


class StudioServer(uvicorn.Server):
    """uvicorn's server with the feeds' goodbye said before its own shutdown (`serve` and BackgroundServer)."""

    def __init__(self, config: uvicorn.Config, goodbyes: Goodbyes):
        super().__init__(config)
        self.goodbyes = goodbyes

    async def shutdown(self, sockets=None) -> None:
        deadline = time.monotonic() + GOODBYE_S
        closing = await self.goodbyes.say(deadline)
        # uvicorn keeps each connection in server_state until its transport is gone (the engine's echo arrived)
        while closing and time.monotonic() < deadline and any(
                tuple(getattr(c, "client", None) or ()) in closing for c in list(self.server_state.connections)):
            await asyncio.sleep(0.02)
        await super().shutdown(sockets)
