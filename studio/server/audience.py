"""A session's audience: read-only peers (the watch page, WHEP players) that receive the session's stream.

The session's owner gets a watch key in its `hello`; the key is what a watch link carries (`?key=`) and what a
WHEP player presents as its bearer token. It is 192 random bits, compared in constant time, and dies with the
session (its audience goes with it). Watchers get the same encoded frames as the owner (`webrtc.fanout`) and
the per-frame status (active prompt, frame); they cannot steer the session.
"""

from __future__ import annotations

import asyncio
import hmac
import secrets
from dataclasses import dataclass, field
from typing import Any, Callable

from studio.server.tasks import TaskSet
from webrtc import protocol as dc
from webrtc.answer import close_peer
from webrtc.fanout import FanOut, WatcherTrack

ENDED = "the session's owner ended it"
ENDED_FLUSH_S = 1.0  # at most this long for the "ended" messages to leave before the watchers' peers close
# what a watcher may ask over its data channel, and the session's answer; everything else steers the session
WATCHER_REQUESTS: dict[str, Callable[[Any, Any], dc.ServerMessage]] = {
    "stats": lambda session, msg: session.stats(),
    "ping": lambda session, msg: dc.Pong.answer(msg.t),
}


class AudienceFull(Exception):
    """The session has as many watchers as the studio allows; answered with HTTP 503."""


@dataclass
class Watcher:
    id: str
    pc: Any                                  # RTCPeerConnection
    track: WatcherTrack
    channel: Any = None
    on_gone: list[Callable[[], None]] = field(default_factory=list)

    def send(self, message: dc.ServerMessage | str) -> None:
        """A message, or its text already made once for every watcher."""
        channel = self.channel
        if channel is not None and channel.readyState == "open":
            channel.send(message if isinstance(message, str) else message.text())


class Audience:
    def __init__(self, session, limit: int = 10):
        self.session = session
        self.limit = limit
        self.key = secrets.token_urlsafe(24)
        self.fanout = FanOut()
        self.watchers: dict[str, Watcher] = {}
        self.pending = 0
        self.closed = False
        self.tasks = TaskSet(f"audience of {session.id}")  # connect timeouts and removals started by callbacks

    # ---- keys -------------------------------------------------------------------------------------------

    def admits(self, presented: str | None) -> bool:
        """The session's watch key, compared in constant time."""
        if not presented or self.closed:
            return False
        return hmac.compare_digest(presented.encode("utf-8", "surrogateescape"), self.key.encode())

    def share(self) -> dict:
        """What the owner may hand out: the key and the two ways to watch with it."""
        sid = self.session.id
        return {"key": self.key, "page": f"/studio/watch/{sid}?key={self.key}", "whep": f"/whep/{sid}",
                "max_watchers": self.limit}

    # ---- membership ------------------------------------------------------------------------------------

    def reserve(self) -> None:
        if len(self.watchers) + self.pending >= self.limit:
            raise AudienceFull(f"session {self.session.id} already has {self.limit} watcher(s), this studio's "
                               "limit per session; try again when someone leaves")
        self.pending += 1

    def add(self, watcher: Watcher) -> None:
        self.watchers[watcher.id] = watcher

    async def remove(self, watcher_id: str) -> bool:
        """Close one watcher's peer; False if it was not (or no longer) there. The owner is not affected."""
        watcher = self.watchers.pop(watcher_id, None)
        if watcher is None:
            return False
        watcher.track.stop()
        await close_peer(watcher.pc)
        return True

    async def _drain(self, timeout_s: float) -> None:
        """Let queued data-channel messages leave before the peers close (closing aborts SCTP, dropping them)."""
        deadline = asyncio.get_running_loop().time() + timeout_s
        while any(w.channel is not None and w.channel.readyState == "open" and w.channel.bufferedAmount
                  for w in self.watchers.values()):
            if asyncio.get_running_loop().time() > deadline:
                return
            await asyncio.sleep(0.02)

    async def close(self, reason: str = ENDED) -> None:
        """The session is over: every watcher hears why, then its peer closes."""
        self.closed = True
        for watcher in list(self.watchers.values()):
            watcher.send(dc.Ended(frame=None, reason=reason))
        await self._drain(ENDED_FLUSH_S)
        self.fanout.close()
        await asyncio.gather(*(self.remove(w) for w in list(self.watchers)))
        await self.tasks.close()

    # ---- the stream and its status -------------------------------------------------------------------

    def publish(self, frame, status: dc.Status) -> None:
        """On the event loop, as the session sends `frame`. Nothing after close(): a frame the track was pacing
        while the session closed must not follow the `ended` message."""
        if self.closed or not self.watchers:
            return
        self.fanout.publish(frame)
        text = status.text()
        for watcher in list(self.watchers.values()):
            watcher.send(text)

    def on_message(self, watcher: Watcher, message: str | bytes) -> None:
        """A watcher's data-channel message: read-only requests are answered, control is refused."""
        try:
            msg = dc.parse_client_message(message)
        except dc.ProtocolError as exc:
            watcher.send(dc.error_message(exc))
            return
        answer = WATCHER_REQUESTS.get(msg.type)
        if answer is None:
            refused = dc.ProtocolError(f"watchers cannot control the session; '{msg.type}' is for its owner",
                                       msg.type)
            watcher.send(dc.error_message(refused, msg.type))
            return
        watcher.send(answer(self.session, msg))
