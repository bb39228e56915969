"""A session's messages to whoever owns it: sent from any thread (the worker's, a take's writer, the event loop)
through the event loop to its listener, and dropped while it has none.

The listener is the owner's WebRTC data channel (`to_data_channel`: each message as its JSON text, while the
channel is open) or an engine's link (studio/server/engine_channel.py), which takes the models themselves.
"""

from __future__ import annotations

import asyncio
from typing import Callable

from webrtc import protocol as dc

Listener = Callable[[dc.ServerMessage], None]     # called on the event loop


def to_data_channel(channel) -> Listener:
    """Deliver to a WebRTC data channel, as JSON text, while it is open."""
    def deliver(message: dc.ServerMessage) -> None:
        if channel.readyState == "open":
            channel.send(message.text())
    return deliver


class Outbox:
    def __init__(self, loop: asyncio.AbstractEventLoop):
        self.loop = loop
        self.listener: Listener | None = None   # the owner's channel, once it is there
        self.errors = 0                 # requests refused so far (the session's stats)

    def send(self, message: dc.ServerMessage) -> None:
        listener = self.listener
        if listener is not None:
            self.later(lambda: listener(message))

    def refusal(self, exc: Exception, request: str | None = None) -> dc.Error:
        """A request that failed: counted; → its one error line (the session goes on)."""
        self.errors += 1
        return dc.error_message(exc, request)

    def refuse(self, exc: Exception, request: str | None = None) -> None:
        """A request that failed, answered on the channel with its one error line."""
        self.send(self.refusal(exc, request))

    def later(self, callback: Callable[[], object]) -> None:
        """Run `callback` on the event loop (from any thread)."""
        try:
            self.loop.call_soon_threadsafe(callback)
        except RuntimeError:            # the loop is closed: the server is going away
            pass
