"""A session's messages to its browser: sent from any thread (the worker's, a take's writer, the event loop)
through the event loop, and dropped while the data channel is not open."""

from __future__ import annotations

import asyncio

from webrtc import protocol as dc


class Outbox:
    def __init__(self, loop: asyncio.AbstractEventLoop):
        self.loop = loop
        self.channel = None             # the owner's data channel, once the browser opened it
        self.errors = 0                 # requests refused so far (the session's stats)

    def send(self, message: dc.ServerMessage) -> None:
        channel = self.channel
        if channel is None:
            return
        text = message.text()

        def _send() -> None:
            if channel.readyState == "open":
                channel.send(text)
        try:
            self.loop.call_soon_threadsafe(_send)
        except RuntimeError:            # the loop is closed: the server is going away
            pass

    def refuse(self, exc: Exception, request: str | None = None) -> None:
        """A request that failed: counted, and answered with one error line; the session goes on."""
        self.errors += 1
        self.send(dc.error_message(exc, request))

    def later(self, callback) -> None:
        """Run `callback` on the event loop (from any thread)."""
        try:
            self.loop.call_soon_threadsafe(callback)
        except RuntimeError:
            pass
