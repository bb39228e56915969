"""The one way in to a live session: typed commands in, typed answers out (docs/architecture.md).

Every front door hands the session's `SessionControl` a client message model (webrtc/protocol.py): the data
channel and the engine link parse the peer's text into one, OSC, gRPC and the REST routes build one with
`dc.build`. `submit` runs the command's check (studio/server/commands.py) at once, on the event loop: a bad
message raises its UserError there and changes nothing, and each front door says so in its own way (an error line,
a gRPC status, an HTTP status). What touches the rollout goes to the session's worker as one `Command`, the only
thing that crosses to its thread. Its answer (an ack, an error line, stats, a pong) goes to the `reply` the front
door gave, from whichever thread made it; `ask` awaits it instead.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any, Callable

from pydantic import BaseModel

from alaya_errors import UserError
from prompt_presets.matching import when_matching_ready
from studio.server.commands import COMMANDS, SessionParts, Step
from studio.server.outbox import Outbox
from webrtc import protocol as dc

Answer = dc.ServerMessage
DRIVING = frozenset({"key", "input"})     # sent many times a second and answered only when refused
MAX_HELD = 32       # switches a session may have waiting for the matcher's first load: a flood is refused, not kept
Reply = Callable[[Answer], None]


class Command:
    """One checked message on its way to the worker: its step runs there, and the answer goes to `reply`."""

    def __init__(self, parts: SessionParts, outbox: Outbox, msg: BaseModel, step: Step, reply: Reply):
        self.parts, self.outbox, self.msg, self.step, self.reply = parts, outbox, msg, step, reply

    def __call__(self) -> None:          # on the worker, between chunks
        try:
            answer = self.step.run(self.parts, self.msg, self.step.data)
        except UserError as exc:         # answered as this request's error, so the page knows which edit failed
            answer = self.outbox.refusal(exc, getattr(self.msg, "type", None))
        if answer is not None:
            self.reply(answer)


class SessionControl:
    def __init__(self, parts: SessionParts, outbox: Outbox):
        self.parts, self.outbox = parts, outbox
        self._held: list[Command] = []       # switches waiting for the matcher, in the order asked
        self._held_lock = threading.Lock()   # taken on the event loop and by the matcher's waiting thread

    def submit(self, msg: BaseModel, reply: Reply | None = None) -> None:
        """On the event loop: check `msg` now (UserError: refused, nothing changed), then answer it or queue its
        step for the worker. `reply` takes the answer (default: the owner's data channel)."""
        reply = reply or self.outbox.send
        kind: str = msg.type            # type: ignore[attr-defined]  # every client model has its type
        checked = COMMANDS[kind](self.parts, msg)
        if not isinstance(checked, Step):
            if checked is not None:
                reply(checked)
            return
        command = Command(self.parts, self.outbox, msg, checked, reply)
        if (checked.after_matcher or checked.in_order) and len(self._held) >= MAX_HELD:
            raise dc.ProtocolError(f"{MAX_HELD} switches already wait for the text-matching model, which is still "
                                   "loading; send this one when it is ready", kind)
        if checked.after_matcher:
            # free text goes through the preset matcher, whose model is still loading: frames go on in the
            # current style meanwhile, and the page hears why
            self.outbox.send(dc.Preparing(request=kind, label=checked.label or kind))
        with self._held_lock:
            hold = checked.after_matcher or (checked.in_order and bool(self._held))
            if hold:
                self._held.append(command)
            first = hold and len(self._held) == 1
            if not hold:
                self.parts.worker.submit(command)
        if first:
            when_matching_ready(self._release_held)

    def _release_held(self) -> None:
        """The matcher is ready: what waited goes to the worker in the order it was asked (under the lock, so a
        switch asked meanwhile cannot overtake it)."""
        with self._held_lock:
            for command in self._held:
                self.parts.worker.submit(command)
            self._held.clear()

    async def ask(self, msg: BaseModel, timeout_s: float = 30.0, tell_owner: bool = False) -> Answer | None:
        """`submit`, awaiting the answer (an `Error` answer is returned, not raised; a refused check raises).
        → None for driving input (answered only when refused, on the channel) or when the worker did not run
        the command within `timeout_s`. `tell_owner`: the owner's channel hears the answer too (a take started
        over REST shows on the page as one started there)."""
        if getattr(msg, "type", None) in DRIVING:
            self.submit(msg)             # only a refused one is answered: on the channel, as for a page
            return None
        loop = asyncio.get_running_loop()
        answered: asyncio.Future[Answer] = loop.create_future()

        def reply(answer: Answer) -> None:
            loop.call_soon_threadsafe(_settle, answered, answer)
            if tell_owner:
                self.outbox.send(answer)
        self.submit(msg, reply)
        try:
            return await asyncio.wait_for(answered, timeout_s)
        except asyncio.TimeoutError:
            return None

    def receive(self, text: str | bytes) -> None:
        """The owner's data channel: one message's text; a bad one answers one error line and changes nothing."""
        try:
            msg = dc.parse_client_message(text)
        except UserError as exc:
            self.outbox.refuse(exc)
            return
        try:
            self.submit(msg)
        except UserError as exc:
            self.outbox.refuse(exc, getattr(msg, "type", None))


def _settle(future: asyncio.Future, answer: Any) -> None:
    if not future.done():
        future.set_result(answer)
