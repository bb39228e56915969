"""One live session: a peer connection's rollout, worker thread, video track and data channel.

Threads: the rollout (source, schedule, render session) belongs to the worker thread alone. Data-channel
messages arrive on the event loop; anything that touches the rollout is queued as a command and applied by
the worker between chunks, which is also why a live prompt switch takes effect at the next chunk. Messages
to the browser leave through `loop.call_soon_threadsafe`.
"""

from __future__ import annotations

import asyncio
import json
import logging
import queue
import threading
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Callable

import av

from alaya_errors import UserError
from gbuffer.source import LiveSource
from studio.rollout import RenderedFrame, Rollout
from studio.server import timeline
from studio.server.audience import Audience
from webrtc import protocol as dc
from webrtc.stamp import stamp_index
from webrtc.track import FrameBuffer, OutgoingFrame, SessionVideoTrack

log = logging.getLogger("alaya.session")

Command = Callable[[], Any]
# data-channel message type → LiveSession method; filled by @handles, one small method per message type
HANDLERS: dict[str, Callable[["LiveSession", Any], None]] = {}


def handles(*kinds: str):
    def register(method):
        for kind in kinds:
            HANDLERS[kind] = method
        return method
    return register


@dataclass(frozen=True)
class FrameStatus:
    """What the session last sent: replaced whole per frame, so a route on the event loop reads one frame's
    figures together."""

    frame: int | None = None
    label: str | None = None
    stages_ms: dict[str, float] = field(default_factory=dict)
    latency_ms: float | None = None


class LiveSession:
    def __init__(self, session_id: str, rollout: Rollout, *, fps: float, source_name: str, renderer_name: str,
                 stamp: bool = False, loop_playback: bool = True, loop: asyncio.AbstractEventLoop,
                 max_watchers: int = 10):
        self.id = session_id
        self.rollout = rollout
        self.fps = fps
        self.source_name = source_name
        self.renderer_name = renderer_name
        self.width, self.height = rollout.session.width, rollout.session.height
        self.stamp = stamp
        self.loop_playback = loop_playback
        self.loop = loop
        self.buffer = FrameBuffer(rollout.session.chunk_size, loop)
        self.track = SessionVideoTrack(self.buffer, fps, on_sent=self._on_sent)
        self.channel = None
        self.codec: str | None = None
        self.encoder = None
        self.state = "starting"          # starting → playing / paused / ended → closed
        self.created = time.perf_counter()
        self.first_frame_sent: float | None = None
        self.errors = 0
        self.keys = dc.KeyState()
        self._commands: queue.SimpleQueue[Command] = queue.SimpleQueue()
        self._wake = threading.Event()
        self._paused = False
        self._ended = False
        self._seeks = 0
        self._stop = False
        self.last_sent = FrameStatus()
        # The newest rendered frame (G-buffer + output), for the inspector; replaced whole, so readers on other
        # threads always see a complete frame.
        self.latest_frame: RenderedFrame | None = None
        self._thread = threading.Thread(target=self._run, name=f"session-{session_id}", daemon=True)
        self.on_closed: Callable[["LiveSession"], None] | None = None
        self.pc = None  # the RTCPeerConnection, set by the session manager
        self.on_ended: Callable[["LiveSession"], None] | None = None  # called from the worker thread
        self.audience = Audience(self, max_watchers)  # read-only peers sharing this session's encoded stream

    # ---- lifecycle -------------------------------------------------------------------------------------

    def start(self) -> None:
        self.state = "playing"
        self._thread.start()

    async def close(self) -> None:
        """Stop the worker, free the rollout (source, render session). Safe to call twice."""
        if self.state == "closed":
            return
        self.state = "closed"
        await self.audience.close()
        self._stop = True
        self._wake.set()
        self.buffer.close()
        self.track.stop()
        if self._thread.ident is not None:
            await self.loop.run_in_executor(None, self._thread.join, 10)
        if self._thread.is_alive():
            log.warning("session %s: worker did not stop within 10 s", self.id)
        else:
            await self.loop.run_in_executor(None, self.rollout.close)
        if self.on_closed is not None:
            self.on_closed(self)

    # ---- worker thread -----------------------------------------------------------------------------------

    def _run(self) -> None:
        try:
            while not self._stop:
                self._apply_commands()
                if self._paused or self._ended:
                    self._wake.wait(0.1)
                    self._wake.clear()
                    continue
                t0, wall0 = time.perf_counter(), time.time()
                chunk = self.rollout.next_chunk()
                self.buffer.note_production(len(chunk), time.perf_counter() - t0)
                if self.loop_playback and self._at_end():
                    self.rollout.seek(0)  # now, so a switch applied next lands on the frame played next
                if not chunk:
                    if self.loop_playback and self.rollout.recorded:
                        continue
                    self._ended = True
                    self.state = "ended"
                    self.send({"type": "ended", "frame": self.rollout.frame_index,
                               "reason": "the source ended"})
                    if not self.rollout.recorded:
                        break  # a live source that ends (a feed that went away) does not come back
                    continue
                self._hand_over(chunk, t0, wall0)
        except UserError as exc:
            self.state = "ended"
            self.send(dc.error_message(exc))
        except Exception as exc:  # a renderer/source bug: end this session only, keep the server up
            log.exception("session %s: worker failed", self.id)
            self.state = "ended"
            self.send({"type": "error", "message": f"internal error: {type(exc).__name__}: {exc}",
                       "where": "session", "request": None})
        finally:
            self.buffer.close()
            if self.state == "ended" and self.on_ended is not None:
                self.on_ended(self)

    def _at_end(self) -> bool:
        return self.rollout.recorded and self.rollout.frame_index >= len(self.rollout.source)

    def _hand_over(self, chunk: list[RenderedFrame], rendered_at: float, rendered_wall: float) -> None:
        seeks = self._seeks
        self.latest_frame = chunk[-1]
        for f in chunk:
            rgb = stamp_index(f.rgb, f.index) if self.stamp else f.rgb
            video = av.VideoFrame.from_ndarray(rgb, format="rgb24").reformat(format="yuv420p")
            info = {"prompts": [{"preset": p.preset, "text": p.text[:80], "weight": round(p.weight, 4)}
                                for p in f.conditioning.prompts], "label": f.conditioning.label(),
                    "stages_ms": {k: round(v, 2) for k, v in f.chunk_timings_ms.items()},
                    "chunk_size": f.chunk_size, "rendered_wall": rendered_wall}
            item = OutgoingFrame(f.index, video, rendered_at, info)
            while not self.buffer.put(item, timeout=0.05):
                if self._stop or self.buffer.closed:
                    return
                # Commands only change what the *next* chunk renders, so they can apply while this one drains;
                # after a seek the rest of this chunk is stale.
                self._apply_commands()
                if self._seeks != seeks:
                    return

    def _apply_commands(self) -> None:
        while True:
            try:
                command = self._commands.get_nowait()
            except queue.Empty:
                return
            try:
                result = command()
                if result is not None:
                    self.send(result)
            except UserError as exc:
                self.errors += 1
                self.send(dc.error_message(exc))

    def submit(self, command: Command) -> None:
        self._commands.put(command)
        self._wake.set()

    # ---- event loop side ------------------------------------------------------------------------------

    def send(self, message: dict) -> None:
        """Send JSON to the browser from any thread; dropped if the channel is not open."""
        channel = self.channel
        if channel is None:
            return
        text = json.dumps(message)

        def _send() -> None:
            if channel.readyState == "open":
                channel.send(text)
        try:
            self.loop.call_soon_threadsafe(_send)
        except RuntimeError:
            pass

    def _on_sent(self, item: OutgoingFrame, sent_at: float) -> None:
        if self.first_frame_sent is None:
            self.first_frame_sent = sent_at
        fps = self.track.meter.fps
        status = {"type": "status", "frame": item.index, **item.info, "fps": round(fps, 2),
                  "target_fps": self.fps, "slow": bool(self.track.frames_sent > 2 * self.fps and
                                                       fps < 0.9 * self.fps),
                  "latency_ms": round((sent_at - item.rendered_at) * 1e3, 1), "state": self.state}
        self.last_sent = FrameStatus(item.index, item.info["label"], item.info["stages_ms"], status["latency_ms"])
        self.send(status)
        self.audience.publish(item.video, status)

    def attach_channel(self, channel) -> None:
        self.channel = channel

        @channel.on("message")
        def _on_message(message) -> None:
            self.handle_message(message)

        @channel.on("open")
        def _on_open() -> None:
            self.send(self.hello())

        if channel.readyState == "open":
            self.send(self.hello())

    def hello(self) -> dict:
        return {"type": "hello", "protocol": dc.PROTOCOL_VERSION, "session_id": self.id,
                "source": self.source_name, "renderer": self.renderer_name, "width": self.width,
                "height": self.height, "fps": self.fps, "recorded": self.rollout.recorded,
                "live": isinstance(self.rollout.source, LiveSource), "codec": self.codec,
                "watch": self.audience.share()}

    def handle_message(self, message: str | bytes) -> None:
        """One data-channel message; a bad one answers an error and changes nothing."""
        try:
            msg = dc.parse_client_message(message)
        except UserError as exc:
            self.errors += 1
            self.send(dc.error_message(exc))
            return
        try:
            self._dispatch(msg)
        except UserError as exc:
            self.errors += 1
            self.send(dc.error_message(exc, msg.type))

    def _dispatch(self, msg) -> None:
        HANDLERS[msg.type](self, msg)

    # ---- message handlers, on the event loop: validate now, queue what touches the rollout ----------------

    @handles("prompt", "preset", "blend")
    def _on_switch_now(self, msg) -> None:
        conditioning = timeline.conditioning_from_message(msg)
        self.submit(lambda: self._switch(conditioning, msg.transition, msg.type))

    @handles("switch")
    def _on_switch_at(self, msg) -> None:
        conditioning = timeline.conditioning_from_specs(msg.prompts, msg.mode)
        self.submit(lambda: self._patch(msg.frame, conditioning, msg.transition))

    @handles("schedule")
    def _on_schedule(self, msg) -> None:
        # parsed by the worker, not here: a 2 KB Parseq export of a million frames takes tens of seconds to
        # evaluate, which on the event loop would freeze every session's video and signalling
        self.submit(lambda: self._replace_schedule(timeline.schedule_from_message(msg)))

    @handles("play", "pause")
    def _on_play_pause(self, msg) -> None:
        paused = msg.type == "pause"
        self.submit(lambda: self._set_paused(paused))

    @handles("seek")
    def _on_seek(self, msg) -> None:
        self._require_recorded("seek")
        self.submit(lambda: self._seek(msg.frame))

    @handles("loop")
    def _on_loop(self, msg) -> None:
        self.loop_playback = msg.on
        self.send({"type": "ack", "request": "loop", "on": msg.on})

    @handles("key", "input", "autopilot")
    def _on_input(self, msg) -> None:
        self._require_live(msg.type)
        self.submit(lambda: self._input(msg))

    @handles("stats")
    def _on_stats(self, msg) -> None:
        self.send(self.stats())

    def _require_recorded(self, what: str) -> None:
        if not self.rollout.recorded:
            raise dc.ProtocolError(f"'{what}' needs a recorded source; {self.source_name} is live", what)

    def _require_live(self, what: str) -> None:
        if not isinstance(self.rollout.source, LiveSource):
            raise dc.ProtocolError(f"'{what}' needs a live source; {self.source_name} is recorded", what)

    # ---- commands, run by the worker between chunks --------------------------------------------------------

    def _switch(self, conditioning, transition: int, request: str) -> dict:
        frame = self.rollout.frame_index
        self.rollout.schedule = timeline.switch(self.rollout.schedule, frame, conditioning, transition)
        return {"type": "ack", "request": request, "frame": frame, "transition": transition,
                "label": conditioning.label()}

    def _patch(self, frame: int, conditioning, transition: int) -> dict:
        self.rollout.schedule = timeline.switch(self.rollout.schedule, frame, conditioning, transition)
        return {"type": "ack", "request": "switch", "frame": frame, "transition": transition,
                "label": conditioning.label()}

    def _replace_schedule(self, schedule) -> dict:
        self.rollout.schedule = schedule
        return {"type": "ack", "request": "schedule", "frame": self.rollout.frame_index}

    def _set_paused(self, paused: bool) -> dict:
        self._paused = paused
        if not paused and self._ended and self.rollout.recorded:
            self.rollout.seek(0)
            self._ended = False
        self.state = "paused" if paused else ("ended" if self._ended else "playing")
        return {"type": "ack", "request": "pause" if paused else "play", "frame": self.rollout.frame_index}

    def _seek(self, frame: int) -> dict:
        self.rollout.seek(frame)
        self._seeks += 1
        self.buffer.clear()
        self._ended = False
        if not self._paused:
            self.state = "playing"
        return {"type": "ack", "request": "seek", "frame": frame}

    def _input(self, msg) -> dict | None:
        source = self.rollout.source
        if msg.type == "autopilot":
            if not hasattr(source, "autopilot"):
                raise dc.ProtocolError(f"{self.source_name} has no autopilot", "autopilot")
            source.autopilot = msg.on
            return {"type": "ack", "request": "autopilot", "on": msg.on}
        if msg.type == "key":
            player_input = self.keys.press(msg.key, msg.down)
        else:
            player_input = timeline.player_input(msg)
        if hasattr(source, "autopilot"):
            source.autopilot = False  # a driver took the wheel
        source.apply_input(player_input)
        return None

    # ---- reporting ---------------------------------------------------------------------------------------

    def stats(self) -> dict:
        return {"type": "stats", "session_id": self.id, "state": self.state, "frame": self.rollout.frame_index,
                "frames_sent": self.track.frames_sent, "fps": round(self.track.meter.fps, 2),
                "target_fps": self.fps, "codec": self.codec,
                "bitrate": getattr(self.encoder, "target_bitrate", None), "errors": self.errors,
                "time_to_first_frame_ms": None if self.first_frame_sent is None else
                round((self.first_frame_sent - self.created) * 1e3, 1),
                "last": asdict(self.last_sent)}
