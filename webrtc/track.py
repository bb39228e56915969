"""The session's video track: frames handed over from the render worker, paced at the session rate.

The worker thread renders a chunk and puts its frames into a `FrameBuffer` that holds at most one chunk; when
it is full the worker waits, so rendering never runs ahead of what is sent (latency stays bounded by one
chunk) and nothing queues up. `recv()` only waits on the buffer and the pacing clock: no rendering, no
encoding, no numpy work on the event loop.

Just in time: the track says when it will next take a frame, and a chunk starts its measured lead (plus a margin
for how much that lead wanders) before the first slot its frames will have, so a frame waits little between its
render and its send, and a command that came meanwhile still reaches it.

Pacing: each frame is due one period after the previous frame's due time (not its actual send, so sleep
overshoot does not accumulate); the period is the session's 1/fps, or the renderer's measured seconds per
frame when that is longer, so a slow renderer gives an even, lower rate. A frame that arrives more than a
period late is sent at once and the clock restarts there: never a burst of catch-up frames. RTP timestamps
come from the due time (90 kHz clock), so they are monotonic across pause and seek.
"""

from __future__ import annotations

import asyncio
import collections
import threading
import time
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Callable

import av
from aiortc import MediaStreamTrack
from aiortc.mediastreams import MediaStreamError

VIDEO_CLOCK = 90_000  # Hz, the RTP video clock


@dataclass
class OutgoingFrame:
    """One frame ready to send: `video` is yuv420p; `index` the timeline frame; `rendered_at` the
    perf_counter time its chunk started rendering (for the latency estimate); `info` goes into the status."""

    index: int
    video: av.VideoFrame
    rendered_at: float
    info: dict[str, Any] = field(default_factory=dict)


class BufferClosed(Exception):
    pass


class FrameBuffer:
    """A bounded hand-over between one producer thread and the asyncio consumer."""

    def __init__(self, capacity: int, loop: asyncio.AbstractEventLoop, send_period: float = 0.0):
        self.capacity = max(1, capacity)
        self._loop = loop
        self.send_period = send_period   # the consumer's seconds per frame (the session's 1/fps)
        self._items: collections.deque[OutgoingFrame] = collections.deque()
        self._cond = threading.Condition()
        self._ready = asyncio.Event()
        self.closed = False
        self._taken = 0                  # frames the consumer took and is pacing out, not sent yet
        # seconds per frame the producer achieves (moving average); the track never paces faster, so a slow
        # renderer gives an even, lower rate instead of chunk-sized bursts
        self.production_period = 0.0
        # seconds from a chunk's start to its first frame (moving average): a streaming renderer's first frames
        # are ready before its chunk is done, and the next chunk need start only that long before the frames
        # waiting have gone
        self.first_frame_lead = 0.0
        # how far a chunk's lead strays from that average (moving mean absolute deviation): a chunk starts this
        # much earlier again, so a slower render than usual rarely makes its frame late for its slot
        self.lead_spread = 0.0
        # when the consumer will take its next frame (perf_counter; the track says as it takes each one); 0, or a
        # moment past: it takes one as soon as there is one
        self.next_take_at = 0.0
        # frames of chunks under way that the producer has not put yet (a worker whose second thread finishes a
        # chunk while the next begins): they go out before the next chunk's, so they count as waiting
        self._promised = 0

    def note_production(self, frames: int, seconds: float, first_seconds: float | None = None) -> None:
        """A chunk of `frames` took `seconds` to render, its first frame ready after `first_seconds` (a renderer
        that hands its chunk over whole: None, the same)."""
        per_frame = seconds / max(1, frames)
        lead = seconds if first_seconds is None else min(first_seconds, seconds)
        self.production_period = _average(self.production_period, per_frame)
        if self.first_frame_lead:
            self.lead_spread = _average(self.lead_spread, abs(lead - self.first_frame_lead))
        self.first_frame_lead = _average(self.first_frame_lead, lead)

    def take_next_at(self, moment: float) -> None:
        """The consumer will take its next frame at `moment` (perf_counter)."""
        with self._cond:
            self.next_take_at = moment
            self._cond.notify_all()

    def put(self, item: OutgoingFrame, timeout: float | None = None, settles: bool = False) -> bool:
        """Block (worker thread) until there is room; False if closed or timed out. `settles`: the frame was
        promised, and is no longer once it is in (one step, so `drained` never sees it in neither count)."""
        with self._cond:
            deadline = None if timeout is None else time.monotonic() + timeout
            while len(self._items) >= self.capacity and not self.closed:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return False
                self._cond.wait(0.1 if left is None else min(0.1, left))
            if self.closed:
                return False
            self._items.append(item)
            if settles:
                self._promised = max(0, self._promised - 1)
        self._loop.call_soon_threadsafe(self._ready.set)
        return True

    def promise(self, frames: int) -> None:
        """`frames` more will be put (or given up with settle) by a chunk that is under way."""
        with self._cond:
            self._promised += frames

    def settle(self, frames: int) -> None:
        """`frames` of those promised were put, or will not be (a seek made them stale)."""
        with self._cond:
            self._promised = max(0, self._promised - frames)
            self._cond.notify_all()

    @property
    def queued(self) -> int:
        """Frames waiting to be taken by the consumer."""
        return len(self._items)

    @property
    def drained(self) -> bool:
        """Every frame put has gone out (or was cleared) and none is promised: none waiting, none taken and not
        yet sent."""
        return not self._items and not self._taken and not self._promised

    def sent(self) -> None:
        """The consumer sent the frame it took last (event loop side, like get)."""
        self._taken = max(0, self._taken - 1)

    def wait_to_render(self, timeout: float) -> bool:
        """Block (worker thread) until a chunk started now is due: its lead (and margin) before the slot its first
        frame will have, after the frames still waiting have gone out one a period from the consumer's next take
        (now, if it is not known). Its frames then do not wait behind them, it renders from input as fresh as it
        can be, and commands that come while it waits still reach it; its later frames are ready before their
        turn as long as the renderer keeps the stream's rate. Frames promised count as waiting. False if closed
        or timed out."""
        deadline = time.perf_counter() + timeout
        with self._cond:
            while not self.closed:
                now = time.perf_counter()
                start_at = self._start_at(now)
                if start_at is not None and now >= start_at:
                    return True
                left = deadline - now
                if left <= 0:
                    return False
                self._cond.wait(left if start_at is None else min(left, start_at - now))
            return False

    @property
    def start_margin(self) -> float:
        """Seconds a chunk starts before its lead strictly needs: two and a half times how far the lead strays,
        and 2 ms for the wake-up."""
        return 0.002 + 2.5 * self.lead_spread

    def _start_at(self, now: float) -> float | None:
        """When a chunk should start (perf_counter), under the lock; None while there is no room for it."""
        waiting = len(self._items) + self._promised
        if len(self._items) >= self.capacity or (self._promised == 0 and waiting >= self.capacity):
            return None
        period = max(self.send_period, self.production_period)
        first_slot = max(now, self.next_take_at) + waiting * period
        return first_slot - self.first_frame_lead - self.start_margin

    def clear(self) -> None:
        """Drop frames not sent yet (after a seek, so the picture jumps at once)."""
        with self._cond:
            self._items.clear()
            self._cond.notify_all()

    async def get(self) -> OutgoingFrame:
        while True:
            with self._cond:
                if self._items:
                    item = self._items.popleft()
                    self._taken += 1
                    self._cond.notify_all()
                    return item
                if self.closed:
                    raise BufferClosed
                self._ready.clear()
            await self._ready.wait()

    def close(self) -> None:
        with self._cond:
            self.closed = True
            self._cond.notify_all()
        try:
            self._loop.call_soon_threadsafe(self._ready.set)
        except RuntimeError:  # loop already closed
            pass


def _average(mean: float, value: float) -> float:
    """The hand-over's moving average (0 until the first value)."""
    return value if not mean else 0.7 * mean + 0.3 * value


class RateMeter:
    """Frames per second over the last `window` seconds of send times."""

    def __init__(self, window: float = 2.0):
        self.window = window
        self._times: collections.deque[float] = collections.deque()

    def tick(self, t: float) -> None:
        self._times.append(t)
        while self._times and t - self._times[0] > self.window:
            self._times.popleft()

    @property
    def fps(self) -> float:
        if len(self._times) < 2:
            return 0.0
        span = self._times[-1] - self._times[0]
        return (len(self._times) - 1) / span if span > 0 else 0.0


class SessionVideoTrack(MediaStreamTrack):
    kind = "video"

    def __init__(self, buffer: FrameBuffer, fps: float,
                 on_sent: Callable[[OutgoingFrame, float], None] | None = None,
                 on_first_recv: Callable[[], None] | None = None):
        super().__init__()
        self.buffer = buffer
        self.period = 1.0 / fps
        self.on_sent = on_sent
        self.on_first_recv = on_first_recv
        self.meter = RateMeter()
        self.frames_sent = 0
        self._start = 0.0
        self._last_due: float | None = None
        self.last_sent = float("-inf")
        self.sending_since = float("inf")

    def stop(self) -> None:
        """The session is over: frames still buffered are dropped now, not when the garbage collector gets to the
        closed peer connection that holds this track (issue 29)."""
        super().stop()
        self.buffer.clear()

    def streaming_for(self) -> float:
        """Seconds this track has been sending without a gap of over 1 s; 0 if it is not sending now."""
        now = time.perf_counter()
        return 0.0 if now - self.last_sent > 1.0 else now - self.sending_since

    async def recv(self) -> av.VideoFrame:
        if self.readyState != "live":
            raise MediaStreamError
        if self.on_first_recv is not None:
            self.on_first_recv()
            self.on_first_recv = None
        # Wait for the frame's slot first, then take the frame: a frame waits in the buffer, where a per-frame
        # producer sees it and holds its next render back, rather than here, where it would only grow older.
        due = None
        if self._last_due is not None:
            due = self._last_due + max(self.period, self.buffer.production_period)
            if (ahead := due - time.perf_counter()) > 0:
                await asyncio.sleep(ahead)
        try:
            item = await self.buffer.get()
        except BufferClosed:
            self.stop()
            raise MediaStreamError from None
        now = time.perf_counter()
        if due is None:
            self._start = due = now
        elif now - due > self.period:
            due = now  # late: restart the clock here instead of bursting to catch up
        self._last_due = due
        self.buffer.take_next_at(due + max(self.period, self.buffer.production_period))
        frame = item.video
        frame.pts = round((due - self._start) * VIDEO_CLOCK)
        frame.time_base = Fraction(1, VIDEO_CLOCK)
        self.frames_sent += 1
        sent_at = time.perf_counter()
        if sent_at - self.last_sent > 1.0:
            self.sending_since = sent_at  # (re)started after a pause or a stall
        self.last_sent = sent_at
        self.meter.tick(sent_at)
        self.buffer.sent()
        if self.on_sent is not None:
            self.on_sent(item, sent_at)
        return frame
