"""One render and one encode per codec for every peer that watches a session.

The session's own track sends each frame once; `FanOut.publish` hands the very same `av.VideoFrame` to every
watcher's `WatcherTrack`. Each peer's RTCRtpSender then asks its encoder to encode that frame; all senders of
one codec share one `SharedEncoder`, which encodes a frame the first time it is asked and answers the other
senders from its cache (the RTP payloads are packetized once; each sender wraps them in its own RTP headers).

A keyframe asked for by any peer (a new watcher, a lost packet) is the next frame's keyframe for all of them.
A frame older than the newest encoded one that is no longer cached is skipped, never encoded again: the codec
has moved on, and encoding the past would corrupt everyone's stream.
A watcher whose sender falls behind does not hold the others back: its queue is bounded, and on overflow it
skips to the newest frame and asks for a keyframe so its decoder recovers at once.

`FanOut.close()` (the session ended) releases the codecs and the frames at once: a closed peer connection is
garbage in reference cycles, freed only by a full collection, and until then it would keep each codec's threads
and buffers (libx264: four threads and some 10 MB a session) alive (issue 29).
"""

from __future__ import annotations

import asyncio
import collections
import threading
import time

import av
from aiortc import MediaStreamTrack
from aiortc.mediastreams import MediaStreamError

from webrtc.encoders import EncoderSettings, install_encoder, make_encoder

ESTIMATE_WINDOW_S = 3.0   # receivers' bitrate estimates (REMB, about one a second each) taken into account
WATCHER_QUEUE = 30         # frames a watcher may lag before it skips ahead (one second at 30 fps)
CACHE_FRAMES = WATCHER_QUEUE + 2  # encoded frames kept for the senders that ask later


class SharedEncoder:
    """An aiortc encoder that several senders use at once: `encode(frame)` runs the codec once per frame."""

    def __init__(self, mime_type: str, settings: EncoderSettings):
        self.mime_type = mime_type
        self.inner = make_encoder(mime_type, settings)
        self.frames_encoded = 0
        self._lock = threading.Lock()   # senders call encode() from executor threads
        self._cache: collections.OrderedDict[int, tuple[av.VideoFrame, tuple[list[bytes], int]]] = \
            collections.OrderedDict()
        self._keyframe_due = False
        self._estimates: collections.deque[tuple[float, int]] = collections.deque()
        self._newest_pts = -1
        self.closed = False

    @property
    def target_bitrate(self) -> int:
        return self.inner.target_bitrate

    @target_bitrate.setter
    def target_bitrate(self, bitrate: int) -> None:
        # Every receiver's estimate arrives here. One stream serves them all, so it follows the weakest of
        # the recent estimates (taking each in turn would reopen the codec whenever two receivers differ).
        now = time.monotonic()
        self._estimates.append((now, bitrate))
        while self._estimates[0][0] < now - ESTIMATE_WINDOW_S:
            self._estimates.popleft()
        self.inner.target_bitrate = min(b for _, b in self._estimates)

    def request_keyframe(self) -> None:
        self._keyframe_due = True

    @property
    def last_encode_ms(self) -> float | None:
        return self.inner.last_encode_ms

    def encode(self, frame: av.VideoFrame, force_keyframe: bool = False) -> tuple[list[bytes], int]:
        with self._lock:
            if self.closed:    # a frame the track was pacing while the session closed: nobody decodes it now
                return [], 0
            hit = self._cache.get(id(frame))
            if hit is not None and hit[0] is frame:
                if force_keyframe:
                    self._keyframe_due = True   # this frame is out already: the next one is a keyframe
                return hit[1]
            if frame.pts is not None and frame.pts <= self._newest_pts:
                self._keyframe_due = True  # a sender far behind: it skips this frame and resyncs at a keyframe
                return [], 0
            keyframe = force_keyframe or self._keyframe_due
            self._keyframe_due = False
            pts = frame.pts  # before encoding: PyAV rebases the frame's pts to the codec's time base
            result = self.inner.encode(frame, keyframe)
            self.frames_encoded += 1
            self._newest_pts = pts if pts is not None else self._newest_pts
            # the frame is kept with its result, so its id() cannot be reused while it is cached
            self._cache[id(frame)] = (frame, result)
            while len(self._cache) > CACHE_FRAMES:
                self._cache.popitem(last=False)
            return result

    def pack(self, packet):  # pre-encoded input: nothing to share
        return self.inner.pack(packet)

    def close(self) -> None:
        """Free the codec (its threads stop) and the cached frames; encode() answers nothing from now on."""
        with self._lock:   # not while a sender's executor thread is inside the codec
            self.closed = True
            self._cache.clear()
            self.inner.codec = None


class SharedEncoders:
    """The encoders of one session, one per codec; the settings (size, fps, bitrate) are the session's."""

    def __init__(self) -> None:
        self.settings: EncoderSettings | None = None
        self.by_codec: dict[str, SharedEncoder] = {}
        self._lock = threading.Lock()

    def install(self, sender, mime_type: str) -> SharedEncoder:
        """Give `sender` (negotiated, before its first frame) the session's encoder for its codec."""
        with self._lock:
            key = mime_type.lower()
            if key not in self.by_codec:
                self.by_codec[key] = SharedEncoder(mime_type, self.settings or EncoderSettings())
            encoder = self.by_codec[key]
        return install_encoder(sender, encoder)

    def request_keyframe(self) -> None:
        for encoder in list(self.by_codec.values()):
            encoder.request_keyframe()

    @property
    def frames_encoded(self) -> int:
        return sum(e.frames_encoded for e in list(self.by_codec.values()))

    def close(self) -> None:
        for encoder in list(self.by_codec.values()):
            encoder.close()


class WatcherTrack(MediaStreamTrack):
    """A watcher's video: the frames the session sends, as they are sent (the session paces them)."""

    kind = "video"

    def __init__(self, fanout: "FanOut"):
        super().__init__()
        self.fanout = fanout
        self._frames: collections.deque[av.VideoFrame] = collections.deque()
        self._ready = asyncio.Event()
        self.frames_sent = 0
        self.on_first_recv = None  # installs the shared encoder, as the session track does

    def push(self, frame: av.VideoFrame) -> None:
        """On the event loop, from the session's track."""
        if len(self._frames) >= WATCHER_QUEUE:
            self._frames.clear()
            self.fanout.encoders.request_keyframe()
        self._frames.append(frame)
        self._ready.set()

    async def recv(self) -> av.VideoFrame:
        if self.on_first_recv is not None:
            self.on_first_recv()
            self.on_first_recv = None
        while not self._frames:
            if self.readyState != "live":
                raise MediaStreamError
            self._ready.clear()
            await self._ready.wait()
        self.frames_sent += 1
        return self._frames.popleft()

    def stop(self) -> None:
        super().stop()
        self._frames.clear()
        self._ready.set()
        self.fanout.tracks.discard(self)


class FanOut:
    """The watchers' tracks of one session and the encoders they share with the session's own sender."""

    def __init__(self) -> None:
        self.encoders = SharedEncoders()
        self.tracks: set[WatcherTrack] = set()

    def track(self) -> WatcherTrack:
        track = WatcherTrack(self)
        self.tracks.add(track)
        self.encoders.request_keyframe()  # a new decoder starts at a keyframe
        return track

    def publish(self, frame: av.VideoFrame) -> None:
        for track in list(self.tracks):
            track.push(frame)

    def close(self) -> None:
        for track in list(self.tracks):
            track.stop()
        self.encoders.close()
