"""An engine session's data channel (studio/server/engine_link.py): what the session's outbox sends to and its
channel handlers read from, for an engine that speaks to its session through a link instead of a WebRTC peer.

Control messages are the data channel's own (docs/datachannel.md) and are answered as on the channel: `request`
hands one to the session's handlers and waits for its answer (ack, error, stats, pong), one request at a time so
answers cannot cross. Everything else the session says (a timeline change, `preparing`, a take stopped, `ended`)
queues for `next_message`; per-frame status does not (each styled frame's header says what the engine needs),
nor does the hello (the link's welcome carries its facts).
"""

from __future__ import annotations

import asyncio
import collections
import json
from typing import Callable

ANSWERS = frozenset({"ack", "error", "stats", "pong"})
UNANSWERED = frozenset({"key", "input"})   # driving messages: the channel answers only a bad one
NOT_FORWARDED = frozenset({"status", "hello"})
STATUS_PREFIX = '{"type": "status"'     # how dc.Status.text() begins (json.dumps of its fields in order)
KEPT_MESSAGES = 256                  # unread messages kept; the oldest go first
ANSWER_TIMEOUT_S = 10.0


class EngineChannel:
    readyState = "open"              # open from the start: the session sends its hello at once

    def __init__(self) -> None:
        self.hello: dict | None = None
        self._on_message: Callable[[str], None] | None = None
        self._waiter: asyncio.Future | None = None
        self._turn = asyncio.Lock()
        self._messages: collections.deque[dict] = collections.deque(maxlen=KEPT_MESSAGES)
        self._arrived = asyncio.Event()
        self.closed = False

    # ---- the session's side (LiveSession.attach_channel, the outbox), on the event loop -------------------

    def on(self, event: str, handler: Callable | None = None):
        if event == "message":
            self._on_message = handler
        return handler                   # "open": open already; "close": the link ends the session itself

    def send(self, text: str) -> None:
        if text.startswith(STATUS_PREFIX):
            return                       # one per frame: not parsed only to be dropped
        message = json.loads(text)
        kind = message.get("type")
        if kind == "hello":
            self.hello = message
        elif kind in ANSWERS and self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(message)
        elif kind not in NOT_FORWARDED:
            self._messages.append(message)
            self._arrived.set()

    # ---- the engine's side ------------------------------------------------------------------------------

    async def request(self, text: str) -> dict | None:
        """Hand one message to the session's handlers → its answer; None for a driving message."""
        async with self._turn:
            if self.closed or self._on_message is None:
                return _error("the session has ended", None)
            kind = _kind(text)
            if kind in UNANSWERED:
                self._on_message(text)
                return None
            self._waiter = asyncio.get_running_loop().create_future()
            try:
                self._on_message(text)
                return await asyncio.wait_for(self._waiter, ANSWER_TIMEOUT_S)
            except asyncio.TimeoutError:
                return _error(f"no answer within {ANSWER_TIMEOUT_S:g} s", kind)
            finally:
                self._waiter = None

    async def next_message(self) -> dict | None:
        while not self._messages:
            if self.closed:
                return None
            self._arrived.clear()
            await self._arrived.wait()
        return self._messages.popleft()

    def close(self) -> None:
        self.closed = True
        self._arrived.set()
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(_error("the session has ended", None))


def _kind(text: str) -> str | None:
    try:
        message = json.loads(text)
    except (ValueError, RecursionError):
        return None                      # the handlers answer it with the error
    kind = message.get("type") if isinstance(message, dict) else None
    return kind if isinstance(kind, str) else None


def _error(message: str, request: str | None) -> dict:
    return {"type": "error", "message": message, "where": "control", "request": request}
