"""An engine session's channel (studio/server/engine_link.py): what stands for the data channel of a session that
an engine owns through a link instead of a WebRTC peer.

Control messages are the data channel's own (docs/datachannel.md) and are answered as on the channel: `request`
hands one to the session's control (studio/server/control.py) and waits for its answer (ack, error, stats, pong),
one request at a time. Everything else the session says (a timeline change, `preparing`, a take stopped, `ended`)
queues for `next_message`; per-frame status does not (each styled frame's header says what the engine needs),
nor does the hello (the link's welcome carries its facts). Messages are told apart by their model, not their text.
"""

from __future__ import annotations

import asyncio
import collections

from alaya_errors import UserError
from studio.server.control import DRIVING, SessionControl
from webrtc import protocol as dc

KEPT_MESSAGES = 256                  # unread messages kept; the oldest go first
ANSWER_TIMEOUT_S = 10.0


class EngineChannel:
    def __init__(self) -> None:
        self.hello: dict | None = None
        self.control: SessionControl | None = None   # the session's, once it is attached
        self._turn = asyncio.Lock()
        self._messages: collections.deque[dict] = collections.deque(maxlen=KEPT_MESSAGES)
        self._arrived = asyncio.Event()
        self._ended = asyncio.Event()
        self.closed = False

    # ---- the session's side: its outbox's listener, on the event loop -----------------------------------

    def deliver(self, message: dc.ServerMessage) -> None:
        if isinstance(message, dc.Hello):
            self.hello = message.wire()
        elif not isinstance(message, dc.Status):     # one per frame: the styled frames say it
            self._messages.append(message.wire())
            self._arrived.set()

    # ---- the engine's side ------------------------------------------------------------------------------

    async def request(self, text: str) -> dict | None:
        """One message's text → its answer; None for a driving message that was accepted."""
        async with self._turn:
            control = self.control
            if self.closed or control is None:
                return _error("the session has ended", None)
            try:
                msg = dc.parse_client_message(text)
            except UserError as exc:
                return control.outbox.refusal(exc).wire()
            kind = msg.type
            asked = asyncio.ensure_future(control.ask(msg, ANSWER_TIMEOUT_S))
            ended = asyncio.ensure_future(self._ended.wait())   # the worker that would answer has stopped
            await asyncio.wait({asked, ended}, return_when=asyncio.FIRST_COMPLETED)
            ended.cancel()
            if not asked.done():
                asked.cancel()
                return _error("the session has ended", kind)
            try:
                answer = asked.result()
            except UserError as exc:
                return control.outbox.refusal(exc, kind).wire()
            if answer is None and kind not in DRIVING:
                return _error(f"no answer within {ANSWER_TIMEOUT_S:g} s", kind)
            return answer.wire() if answer is not None else None

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
        self._ended.set()


def _error(message: str, request: str | None) -> dict:
    return dc.Error(message=message, where="control", request=request).wire()
