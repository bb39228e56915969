"""Server side of the engine feed: connected feeds by name, each a latest-frame slot, and the LiveSource a
session reads from one. Transport-agnostic: whoever reads the WebSocket calls `Feed.push`, and gives the feed
a `send` callable for the back-channel (player input, session events)."""

from __future__ import annotations

import threading
import time
from typing import Callable, Iterator

from gbuffer.feed.messages import EngineInput, SessionEvent
from gbuffer.feed.protocol import CLOSE, FeedError, FeedLimits, Hello
from gbuffer.frame import GBufferError, GBufferFrame
from gbuffer.input import PlayerInput
from gbuffer.source import LiveSource


ARRIVAL = "feed_arrival_s"          # frame.meta: time.monotonic() when the frame reached its feed

ToEngine = EngineInput | SessionEvent | dict     # what goes back to the engine, as its transport writes it


class Feed:
    """One connected external engine. Keeps only its newest frame; subscribers wait for newer ones."""

    def __init__(self, hello: Hello, send: Callable[[ToEngine], None], limits: FeedLimits = FeedLimits()):
        self.hello = hello
        self.name = hello.name
        self._send = send
        self.limits = limits
        self.frames = 0
        self.closed = False
        self.close_reason = ""
        self.subscribers = 0
        self._latest: GBufferFrame | None = None
        self._meta: tuple[int, dict] | None = None     # the engine's meta message for the frame that comes next
        self._cond = threading.Condition()
        # The frame-rate cap is a token bucket counted on arrival: a long-term rate of 1.5 x the engine's fps, with
        # a burst of two seconds of it. A plain per-second window closed honest engines whenever the server
        # stopped reading for a moment (a session starting on a loaded machine) and then read the queued frames in
        # one go; a flood still empties the bucket within a second.
        self._rate = min(limits.max_fps, hello.fps) * 1.5
        self._burst = 2 * self._rate + 2
        self._tokens = self._burst
        self._last_arrival = time.monotonic()

    def arrive(self) -> float:
        """Count one frame against the rate cap the moment its message arrives, before it is decoded (counted
        after decoding, a flood is paced by the decoder and never trips the cap: issue 42); → the arrival time.
        Raises FeedError past the cap."""
        now = time.monotonic()
        self._tokens = min(self._burst, self._tokens + (now - self._last_arrival) * self._rate)
        self._last_arrival = now
        if self._tokens < 1:
            raise FeedError(f"more than {self._rate:.0f} frames a second beyond a burst of {self._burst:.0f} "
                            f"(hello said {self.hello.fps:g} fps)", code=CLOSE["rate"])
        self._tokens -= 1
        return now

    def hold_meta(self, index: int, entries: dict) -> None:
        """The engine's meta message (gbuffer/feed/meta.py), kept for the frame it names, which comes next. One at a
        time: a second before its frame is refused, so a feed cannot pile them up."""
        if self._meta is not None:
            raise FeedError(f"frame {index}: a second meta message before frame {self._meta[0]} arrived")
        self._meta = (index, entries)

    def push(self, frame: GBufferFrame, arrived: float | None = None) -> None:
        """A new frame from the engine (counted now, unless `arrive()` already counted it at `arrived`), with the
        meta message that came before it; the studio's own entries (its source name, the arrival) win."""
        now = self.arrive() if arrived is None else arrived
        if self._meta is not None:
            index, entries = self._meta
            self._meta = None
            if index != frame.index % 2**32:
                raise FeedError(f"a meta message for frame {index} came before frame {frame.index}")
            frame.meta = {**entries, **frame.meta}
        frame.meta[ARRIVAL] = now         # the studio's share of a round trip counts from here (return path)
        with self._cond:
            self._latest = frame
            self.frames += 1
            self._cond.notify_all()

    def wait_frame(self, after: int, timeout: float, cancelled: Callable[[], bool] = lambda: False
                   ) -> GBufferFrame | None:
        """The newest frame once more than `after` frames have arrived; None on timeout, close or `cancelled()`
        (checked whenever `wake` is called)."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while self.frames <= after and not self.closed:
                if cancelled():
                    return None
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                self._cond.wait(left)
            return None if self.closed else self._latest

    def wake(self) -> None:
        with self._cond:
            self._cond.notify_all()

    def send(self, message: ToEngine) -> None:
        """To the engine: a feed message, or (protocol 2) a data-channel message of its session as a dict."""
        if not self.closed:
            self._send(message)

    def close(self, reason: str = "closed") -> None:
        with self._cond:
            self.closed = True
            self.close_reason = reason
            self._cond.notify_all()


class FeedHub:
    """Connected feeds by name. Thread-safe."""

    def __init__(self, limits: FeedLimits = FeedLimits()):
        self.limits = limits
        self.connected = 0                # sockets past their handshake, with or without a hello yet (loop only)
        self._feeds: dict[str, Feed] = {}
        self._lock = threading.Lock()

    def register(self, hello: Hello, send: Callable[[ToEngine], None]) -> Feed:
        with self._lock:
            if hello.name in self._feeds:
                raise FeedError(f"a feed named {hello.name!r} is already connected", "hello.name",
                                CLOSE["conflict"])
            feed = self._feeds[hello.name] = Feed(hello, send, self.limits)
            return feed

    def remove(self, feed: Feed, reason: str = "disconnected") -> None:
        feed.close(reason)
        with self._lock:
            if self._feeds.get(feed.name) is feed:
                del self._feeds[feed.name]

    def get(self, name: str) -> Feed:
        with self._lock:
            feed = self._feeds.get(name)
        if feed is None:
            raise GBufferError(f"no engine feed named {name!r} is connected"
                               f" (connected: {', '.join(self.names()) or 'none'})", "source")
        return feed

    def names(self) -> list[str]:
        with self._lock:
            return sorted(self._feeds)

    def feeds(self) -> list[Feed]:
        with self._lock:
            return list(self._feeds.values())


class FeedSource(LiveSource):
    """A session's view of a feed: yields the newest frame each time it is asked (skipping frames it was too
    slow for), forwards player input to the engine, and ends when the feed closes or goes silent."""

    def __init__(self, feed: Feed, session_id: str = "", stall_timeout: float = 5.0):
        self.feed = feed
        self.session_id = session_id
        self.stall_timeout = stall_timeout
        self.width, self.height, self.fps = feed.hello.width, feed.hello.height, feed.hello.fps
        self.name = f"feed:{feed.name}"
        self._seen = 0
        self._closed = False
        self._interrupted = False
        feed.subscribers += 1
        feed.send(SessionEvent(event="session_started", session_id=session_id))

    def __iter__(self) -> Iterator[GBufferFrame]:
        while not self._closed:
            frame = self.feed.wait_frame(self._seen, self.stall_timeout, lambda: self._interrupted)
            if frame is None:
                return
            self._seen = self.feed.frames
            yield frame

    def apply_input(self, player_input: PlayerInput) -> None:
        p = player_input.clamped()
        self.feed.send(EngineInput(steer=p.steer, throttle=p.throttle, brake=p.brake, reset=p.reset,
                                   handbrake=p.handbrake, session_id=self.session_id))

    def frame_ready(self, timeout: float) -> bool:
        self.feed.wait_frame(self._seen, timeout, lambda: self._interrupted)
        return self.feed.frames > self._seen or self.feed.closed or self._interrupted

    def interrupt(self) -> None:
        self._interrupted = True
        self.feed.wake()

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self.feed.subscribers -= 1
            self.feed.send(SessionEvent(event="session_ended", session_id=self.session_id))
