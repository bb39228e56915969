"""What a live session reports about the frames it sends: each frame's status (to the owner and its watchers),
the `stats` answer, and the figures the metrics and the REST API read."""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from typing import Any

from timeline.rollout import RenderedFrame
from studio.server.metrics import SessionObserver
from webrtc import protocol as dc
from webrtc.track import OutgoingFrame, SessionVideoTrack


@dataclass(frozen=True)
class FrameStatus:
    """What the session last sent: replaced whole per frame, so a route on the event loop reads one frame's
    figures together."""

    frame: int | None = None
    label: str | None = None
    sent_wall: float | None = None      # when it left the session's pacing, Unix seconds
    stages_ms: dict[str, float] = field(default_factory=dict)
    latency_ms: float | None = None


class SessionReports:
    def __init__(self, track: SessionVideoTrack, fps: float, observer: SessionObserver | None,
                 offered_at: float | None):
        self.track = track
        self.fps = fps
        self.observer = observer
        self.created = offered_at or time.perf_counter()   # time to first frame counts from the offer
        self.first_frame_sent: float | None = None
        self.last_sent = FrameStatus()
        self.encoder = None             # the session's video encoder, once the first frame is encoded

    def frame_sent(self, item: OutgoingFrame, sent_at: float, **now) -> dc.Status:
        """On the event loop, as the track sends `item`; `now`: the session's state, queued frames, take."""
        if self.first_frame_sent is None:
            self.first_frame_sent = sent_at
            if self.observer is not None:
                self.observer.first_frame(sent_at - self.created)
        if self.observer is not None:
            self.observer.frame_sent(sent_at - item.rendered_at)
        fps = self.track.meter.fps
        status = dc.Status(frame=item.index, **item.info, fps=round(fps, 2), target_fps=self.fps,
                           slow=bool(self.track.frames_sent > 2 * self.fps and fps < 0.9 * self.fps),
                           latency_ms=round((sent_at - item.rendered_at) * 1e3, 1), encode_ms=self._encode_ms(),
                           **now)
        self.last_sent = FrameStatus(item.index, status.label, time.time(), status.stages_ms, status.latency_ms)
        return status

    def frame_at(self, when: float) -> float | None:
        """The timeline frame this session sends at wall-clock `when` (Unix seconds), from the last frame it sent
        at the rate it is sending (a renderer slower than the target sends fewer frames than asked); None before
        its first. (Paused, no frame is sent then: the one after it is.)"""
        last = self.last_sent
        if last.frame is None or last.sent_wall is None:
            return None
        measured = self.track.meter.fps
        rate = measured if measured > 0 else self.fps
        return last.frame + (when - last.sent_wall) * rate

    def stats(self, **facts) -> dc.StatsReport:
        """`facts`: session_id, state, frame, codec, errors."""
        ttff = self.first_frame_sent
        return dc.StatsReport(**facts, frames_sent=self.track.frames_sent, fps=round(self.track.meter.fps, 2),
                              target_fps=self.fps, bitrate=getattr(self.encoder, "target_bitrate", None),
                              time_to_first_frame_ms=None if ttff is None else round((ttff - self.created) * 1e3, 1),
                              last=asdict(self.last_sent))

    def _encode_ms(self) -> float | None:
        """The previous frame's (a frame is encoded after its status goes out)."""
        ms = getattr(self.encoder, "last_encode_ms", None)
        return None if ms is None else round(ms, 2)


@dataclass
class ChunkClock:
    """A live chunk's start, which its frames' latency counts from (perf_counter, and the same moment as Unix
    time for the viewer's clock), and how long its frames took to come from the source (set once taken)."""

    started: float
    wall: float
    take_s: float = 0.0
    # seconds from the start until its first frame was ready to hand over (taken, rendered, stamped, converted):
    # the lead the next chunk starts by (webrtc/track.py); None until then
    first_ready_s: float | None = None

    def lead_s(self, otherwise: float) -> float:
        """The measured lead, or `otherwise` when no frame was handed over (a chunk gone stale)."""
        return otherwise if self.first_ready_s is None else self.first_ready_s

    @classmethod
    def now(cls) -> "ChunkClock":
        return cls(time.perf_counter(), time.time())


def frame_info(f: RenderedFrame, clock: ChunkClock) -> dict[str, Any]:
    """What the frame's status says about it (dc.Status), as it is handed over: `ready_ms` is now, from the
    chunk's start, so a viewer can tell the source's take, the render until this frame, and the wait to be sent
    apart (a chunk's later frames wait for their turn at the stream's rate)."""
    info = {"prompts": [{"preset": p.preset, "text": p.text[:80], "weight": round(p.weight, 4)}
                        for p in f.conditioning.prompts], "label": f.conditioning.label(),
            "stages_ms": {k: round(v, 2) for k, v in f.chunk_timings_ms.items()},
            "chunk_size": f.chunk_size, "rendered_wall": clock.wall, "take_ms": round(clock.take_s * 1e3, 1),
            "ready_ms": round((time.perf_counter() - clock.started) * 1e3, 1)}
    if "control" in f.gbuffer.meta:     # the built-in engine: the control this frame was driven with
        info["control"] = f.gbuffer.meta["control"]
    return info
