"""Python client for the engine feed: connect an engine (any `Source`) to a studio over WebSocket.

    with FeedClient("ws://127.0.0.1:7860/api/engine/feed", name="kart", width=416, height=224, fps=30) as c:
        stream_source(engine, c)          # sends frames at the engine's rate, applies inputs that come back

Synchronous on purpose (one thread sends, a background thread receives): engines are usually loops.

With `output` (feed protocol 2) the studio starts the engine's own session and sends its styled frames back:

    with FeedClient(URL, name="kart", width=416, height=224, fps=30, output={"format": "jpeg"}) as c:
        c.welcome["session_id"], c.welcome["watch"]   # the session; browsers watch it through that link
        c.control({"type": "preset", "name": "volcano"})   # → the ack (or error), as on the data channel
        for styled in c.frames():          # StyledFrame: .index (the G-buffer frame's), .rgb(), .missed
            ...
"""

from __future__ import annotations

import collections
import contextlib
import json
import queue
import threading
import time
from typing import Callable, Iterator

from websockets.exceptions import ConnectionClosed, InvalidHandshake
from websockets.sync.client import ClientConnection, connect

from alaya_errors import validate
from gbuffer.feed.messages import EngineInput, SessionEvent, Welcome, parse_studio_text
from gbuffer.feed.meta import encode_meta
from gbuffer.feed.protocol import HELLO, RETURN_PROTOCOL, FeedError, StyledFrame, decode_styled, encode_frame
from gbuffer.feed.roundtrip import RoundTrips
from gbuffer.frame import GBufferFrame
from gbuffer.input import PlayerInput, newer_input
from gbuffer.source import LiveSource, Source


# What a close the studio sent without a reason means (a studio shutting down says its reason first; uvicorn's
# own 1012 without one follows for an engine that did not echo it in time; a killed studio sends none: 1006).
CLOSED_BY = {1000: "the studio ended the feed", 1001: "the studio went away", 1006: "the connection to the "
             "studio was lost (no close frame: the studio was stopped or the network dropped)",
             1011: "the studio failed", 1012: "the studio is shutting down or restarting",
             1013: "the studio is full or busy; try again later"}
# closes worth connecting again after (the studio went away, or was busy), not the engine's own fault
RECONNECT_AFTER = {1001, 1006, 1011, 1012, 1013, 4408}
RECONNECT_FIRST_S, RECONNECT_LONGEST_S = 0.5, 5.0
RETURNED_MAX = 2**26                 # bytes of one message from the studio with the return path (a big rgb24 frame)
STYLED_KEPT = 4                      # styled frames kept for a slow reader of frames()
ANSWERS = ("ack", "error", "stats", "pong")   # what a control message is answered with


def close_reason(exc: ConnectionClosed) -> tuple[int, str]:
    """The close code and a reason that is never empty: the studio's own, else what the code means."""
    frame = exc.rcvd
    code = frame.code if frame is not None else 1006
    if frame is not None and frame.reason:
        return code, frame.reason
    return code, f"{CLOSED_BY.get(code, 'the studio closed the feed')} (close code {code})"


class FeedClient:
    def __init__(self, url: str, *, name: str, width: int, height: int, fps: float,
                 token: str | None = None, compression: str = "zlib", rgb: bool = False,
                 output: dict | None = None, reconnect_for_s: float = 0.0):
        self.url = url
        self.reconnect_for_s = reconnect_for_s   # stream_source: how long to keep trying after the studio went away
        self.reconnects = 0
        self.past_closes: list[tuple[int | None, str | None]] = []   # (code, reason) of each close reconnected after
        returns = {"protocol": RETURN_PROTOCOL, "output": output} if output is not None else {}
        self.hello = validate(HELLO, dict(name=name, width=width, height=height, fps=float(fps),
                                          compression=compression, rgb=rgb, meta=True, **returns), FeedError,
                              "feed client")
        self.token = token
        self.welcome: dict | None = None
        self.events: list[dict] = []
        self.inputs_received = 0
        self.close_reason: str | None = None
        self.close_code: int | None = None
        self._input: PlayerInput | None = None
        self._lock = threading.Lock()
        self.messages: list[dict] = []         # protocol 2: the session's own (timeline, preparing, ended, ...)
        self.frames_dropped = 0                # styled frames this client received but nobody read in time
        self.roundtrips = RoundTrips()         # G-buffer frame sent → its styled frame received
        self._styled: collections.deque[StyledFrame] = collections.deque(maxlen=STYLED_KEPT)
        self._answers: queue.SimpleQueue[dict] = queue.SimpleQueue()
        self._asking = threading.Lock()        # one control request at a time: answers come in order
        self._arrived = threading.Condition()
        self._ws: ClientConnection | None = None
        self._reader: threading.Thread | None = None
        self._stack = contextlib.ExitStack()

    def connect(self) -> dict:
        """Open the socket, say hello, wait for the welcome; FeedError with the studio's reason if refused."""
        headers = {"Authorization": f"Bearer {self.token}"} if self.token else None
        try:
            ws = self._ws = self._stack.enter_context(connect(self.url, additional_headers=headers,
                                                              compression=None,
                                                              max_size=RETURNED_MAX if self.returns else 2**20,
                                                              open_timeout=10))
        except (OSError, InvalidHandshake) as exc:
            raise FeedError(f"cannot connect to {self.url}: {exc}", "--connect") from None
        try:
            ws.send(self.hello.to_json())
            reply = parse_studio_text(ws.recv(timeout=30 if self.returns else 10))  # 2: its session starts first
        except ConnectionClosed as exc:
            self.close_code = close_reason(exc)[0]
            raise FeedError(f"the studio refused the feed: {close_reason(exc)[1]}", "--connect") from None
        if not isinstance(reply, Welcome):
            raise FeedError(f"unexpected answer to hello: {str(reply)[:200]}", "--connect")
        self.welcome = reply.wire()
        self._reader = threading.Thread(target=self._read, args=(ws,), name=f"feed-{self.hello.name}", daemon=True)
        self._reader.start()
        return self.welcome

    def _read(self, ws: ClientConnection) -> None:
        try:
            for message in ws:
                if isinstance(message, bytes):
                    self._keep(decode_styled(message))
                    continue
                msg = parse_studio_text(message)
                if isinstance(msg, EngineInput):
                    with self._lock:
                        self._input = newer_input(self._input, PlayerInput(msg.steer, msg.throttle, msg.brake,
                                                                           msg.reset, msg.handbrake))
                        self.inputs_received += 1
                elif isinstance(msg, SessionEvent):
                    self.events.append(msg.wire())
                elif isinstance(msg, dict) and msg.get("type") in ANSWERS:   # the data channel's, as documented
                    self._answers.put(msg)
                elif isinstance(msg, dict):
                    self.messages.append(msg)
        except ConnectionClosed as exc:
            self.close_code, self.close_reason = close_reason(exc)
        except FeedError as exc:               # a styled frame this client cannot read: stop reading
            self.close_reason = str(exc)
        self.close_reason = self.close_reason or "closed by the studio"
        with self._arrived:
            self._arrived.notify_all()

    def _keep(self, frame: StyledFrame) -> None:
        self.roundtrips.arrived(frame)
        with self._arrived:
            if len(self._styled) == self._styled.maxlen:
                self.frames_dropped += 1
            self._styled.append(frame)
            self._arrived.notify_all()

    def frames(self, timeout: float | None = None) -> Iterator[StyledFrame]:
        """Protocol 2: the styled frames in the order they came, waiting for each; it ends when the feed closes
        (or nothing arrives for `timeout` s). Frames are kept for a slow reader up to STYLED_KEPT, then the
        oldest go (counted in `frames_dropped`; the studio's own skips are each frame's `missed`)."""
        while True:
            with self._arrived:
                if not self._arrived.wait_for(lambda: self._styled or not self.connected, timeout):
                    return
                if not self._styled:
                    return
                frame = self._styled.popleft()
            yield frame

    def control(self, message: dict, timeout: float = 10.0) -> dict | None:
        """Protocol 2: one data-channel message (prompt, preset, blend, schedule, ...: docs/datachannel.md) →
        the studio's answer (an ack or an error, as a dict); None for `key` and `input`, which it never answers."""
        if not self.returns:
            raise FeedError("control messages need the return path: give FeedClient an output", "feed client")
        return ask(self._asking, lambda: self._send(json.dumps(message)), self._answers, message, timeout)

    @property
    def returns(self) -> bool:
        return self.hello.protocol == RETURN_PROTOCOL

    @property
    def connected(self) -> bool:
        return self._ws is not None and self.close_reason is None

    def take_input(self) -> PlayerInput | None:
        """The newest player input since the last call, or None; a reset sent since is kept in it."""
        with self._lock:
            p, self._input = self._input, None
            return p

    def send_frame(self, frame: GBufferFrame) -> None:
        if frame.width != self.hello.width or frame.height != self.hello.height:
            raise FeedError(f"frame is {frame.width}x{frame.height}, the hello said "
                            f"{self.hello.width}x{self.hello.height}", "feed client")
        message = encode_frame(frame, self.hello.compression, self.hello.rgb)
        meta = encode_meta(frame.index, frame.meta) if self.welcome and self.welcome.get("meta") else None
        if meta is not None:
            self._send(meta)
        if self.returns:
            self.roundtrips.sent(frame.index)
        self._send(message)

    def _send(self, message: str | bytes) -> None:
        if self._ws is None:
            raise FeedError("not connected: call connect() (or use the client in a with block) first",
                            "feed client")
        try:
            self._ws.send(message)
        except ConnectionClosed as exc:
            self.close_code, self.close_reason = close_reason(exc)    # the reader may not have seen it yet
            raise FeedError(f"the studio closed the feed: {self.close_reason}", "feed client") from None

    def close(self) -> None:
        if self._ws is not None:
            self._stack.close()
            if self._reader is not None:
                self._reader.join(timeout=5)

    def may_reconnect(self) -> bool:
        """Closed by the studio going away (a restart, a dropped network, a busy studio), and asked to come back."""
        return self.reconnect_for_s > 0 and self.close_code in RECONNECT_AFTER

    def reconnect(self) -> dict:
        """A new connection after the studio closed this one: tries after 0.5 s, then waits twice as long each
        time up to 5 s, for `reconnect_for_s` in all; the new welcome, or the last FeedError. A protocol-2
        client gets a new session (its id, key and watch link are the new welcome's)."""
        self.close()
        self.past_closes.append((self.close_code, self.close_reason))
        deadline = time.monotonic() + self.reconnect_for_s
        wait = RECONNECT_FIRST_S
        while True:
            time.sleep(min(wait, max(0.0, deadline - time.monotonic())))
            self._ws, self._reader, self._stack = None, None, contextlib.ExitStack()
            self.close_reason = self.close_code = None
            try:
                welcome = self.connect()
                self.reconnects += 1
                return welcome
            except FeedError as exc:
                self.close()
                if time.monotonic() >= deadline:
                    raise FeedError(f"the studio did not take the feed again within {self.reconnect_for_s:g} s: "
                                    f"{exc.detail}", "--connect") from None
            wait = min(wait * 2, RECONNECT_LONGEST_S)

    def __enter__(self) -> "FeedClient":
        if self._ws is None:
            self.connect()
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def ask(asking: threading.Lock, send: Callable[[], None], answers: "queue.SimpleQueue[dict]", message: dict,
        timeout: float) -> dict | None:
    """One control message sent and its answer awaited, one message at a time (both transports' clients): the
    studio answers in order, and never answers `key` or `input`."""
    with asking:
        send()
        if message.get("type") in ("key", "input"):
            return None
        try:
            return answers.get(timeout=timeout)
        except queue.Empty:
            raise FeedError(f"no answer to {message.get('type')!r} within {timeout:g} s", "feed client") from None


def stream_source(source: Source, client: FeedClient, *, max_frames: int | None = None,
                  on_frame: Callable[[GBufferFrame], None] | None = None) -> int:
    """Send `source` frames at its fps until it ends, `max_frames`, or the studio closes the feed (when it goes
    away, a client with `reconnect_for_s` connects again and goes on: FeedClient.reconnect).

    Player input from the studio is applied to a live source before each tick. Returns frames sent."""
    period = 1.0 / source.fps
    start = time.perf_counter()
    sent = paced = 0
    for frame in source:
        if max_frames is not None and sent >= max_frames:
            break
        try:
            client.send_frame(frame)
        except FeedError:
            if client.connected:       # not the studio's close (that ends the loop below): a frame that is wrong
                raise
        else:
            sent += 1
        if on_frame is not None:
            on_frame(frame)
        if isinstance(source, LiveSource) and (p := client.take_input()) is not None:
            source.apply_input(p)
        if not client.connected:
            if not client.may_reconnect():
                break
            client.reconnect()
            start, paced = time.perf_counter(), 0            # the pace starts again from the new connection
            continue
        paced += 1
        delay = start + paced * period - time.perf_counter()
        if delay > 0:
            time.sleep(delay)
        else:
            start -= delay  # behind: keep the rate, do not burst
    return sent
