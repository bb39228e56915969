"""One live session: a peer connection's rollout, worker thread, video track and data channel.

Threads: the rollout (source, schedule, render session) belongs to the worker thread alone. Data-channel
messages arrive on the event loop; anything that touches the rollout is queued as a command and applied by
the worker between chunks, which is also why a live prompt switch takes effect at the next chunk. Messages
to the browser leave through `loop.call_soon_threadsafe`.
"""

from __future__ import annotations

import asyncio
import logging
import queue
import threading
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Callable

import av

from alaya_errors import UserError
from gbuffer.source import LiveSource
from prompt_presets.matching import when_matching_ready
from studio.rollout import RenderedFrame, Rollout
from studio.schedule.live import LiveTimeline
from studio.server import timeline
from studio.server.audience import Audience
from studio.server.metrics import SessionObserver
from studio.takes import TakeError, TakeRecorder, TakeStore
from webrtc import protocol as dc
from webrtc.stamp import stamp_fits, stamp_index
from webrtc.track import FrameBuffer, OutgoingFrame, SessionVideoTrack

log = logging.getLogger("alaya.session")

Command = Callable[[], Any]
# data-channel message type → LiveSession method; filled by @handles, one small method per message type
HANDLERS: dict[str, Callable[["LiveSession", Any], None]] = {}


def handles(*kinds: str):
    def register(method):
        for kind in kinds:
            if kind in HANDLERS:
                raise TypeError(f"two handlers for {kind!r} messages")
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
                 observer: SessionObserver | None = None, offered_at: float | None = None,
                 takes: TakeStore | None = None, max_watchers: int = 10):
        self.id = session_id
        self.rollout = rollout
        self.timeline = LiveTimeline(rollout.schedule)
        rollout.schedule = self.timeline
        self.fps = fps
        self.source_name = source_name
        self.renderer_name = renderer_name
        self.width, self.height = rollout.session.width, rollout.session.height
        self.stamp = stamp
        self.loop_playback = loop_playback
        self._loop_source()
        self.loop = loop
        self.buffer = FrameBuffer(rollout.session.chunk_size, loop)
        self.track = SessionVideoTrack(self.buffer, fps, on_sent=self._on_sent)
        self.channel = None
        self.codec: str | None = None
        self.encoder = None
        self.state = "starting"          # starting → playing / paused / ended → closed
        self.created = offered_at or time.perf_counter()   # time to first frame counts from the offer
        self.observer = observer
        self.takes = takes
        self.take: TakeRecorder | None = None   # the take being recorded, if any
        self.first_frame_sent: float | None = None
        self.errors = 0
        self.keys = dc.KeyState()
        self._commands: queue.SimpleQueue[Command] = queue.SimpleQueue()
        self._wake = threading.Event()
        self._paused = False
        self._ended = False
        self._after_sent: dc.Ended | None = None     # a message to send after the last frame now buffered
        self._failed = False                     # the session's one fatal error was sent
        self._fail_lock = threading.Lock()
        self._seeks = 0
        self._stop = False
        self.last_sent = FrameStatus()
        # The newest rendered frame (G-buffer + output), for the inspector; replaced whole, so readers on other
        # threads always see a complete frame.
        self.latest_frame: RenderedFrame | None = None
        self._thread = threading.Thread(target=self._run, name=f"session-{session_id}", daemon=True)
        self.on_closed: Callable[["LiveSession"], None] | None = None
        self.pc = None  # the RTCPeerConnection, set by the session manager
        self.watcher: asyncio.Task | None = None  # the manager's peer watchdog for this session
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
        if self.take is not None:   # the worker is gone: the take has all it will get
            take = self.take
            take.stop("the session ended")
            await self.loop.run_in_executor(None, take.join, 30)
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
                if self.timeline.advance(self.rollout.frame_index):
                    self.send(dc.TimelineChanged(frame=self.rollout.frame_index, reason="next pass of the loop"))
                if self.rollout.session.chunk_size == 1 and not self.buffer.wait_for_room(0.05):
                    continue   # render just in time: only once the last frame is on its way (commands apply)
                t0, wall0 = time.perf_counter(), time.time()
                count, parts = self.rollout.next_chunk_parts()
                if self.loop_playback and self._at_end():
                    self.rollout.seek(0)  # now, so a switch applied next lands on the frame played next
                if count:
                    rendered_s = self._hand_over_parts(parts, t0, wall0)
                    self.buffer.note_production(count, rendered_s)
                    if self.observer is not None:
                        self.observer.chunk_rendered(rendered_s)
                    continue
                if self.loop_playback and self.rollout.recorded:
                    continue
                self._ended = True
                self.state = "ended"
                ended = dc.Ended(frame=self.rollout.frame_index, reason="the source ended")
                if not self.rollout.recorded:
                    self.send(ended)   # now: the session closes right after, its last frames with it
                    break  # a live source that ends (a feed that went away) does not come back
                self._after_last_frame(ended)   # the session stays (seek, loop): after its last frame
        except UserError as exc:
            self.fail(exc)
        except Exception as exc:  # a renderer/source bug: end this session only, keep the server up
            log.exception("session %s: worker failed", self.id)
            self.state = "ended"
            self.send(dc.Error(message=f"internal error: {type(exc).__name__}: {exc}", where="session", request=None))
        finally:
            self.buffer.close()
            if self.state == "ended" and self.on_ended is not None:
                self.on_ended(self)

    def fail(self, exc: UserError) -> bool:
        """End the session with one error message (from the worker, or from outside: its render worker died
        while it was paused); → False when it had already failed (the viewer hears it once)."""
        with self._fail_lock:
            if self._failed:
                return False
            self._failed = True
        self.state = "ended"
        self.send(dc.error_message(exc))
        return True

    def _after_last_frame(self, message: dc.Ended) -> None:
        """Send `message` once the frames handed over so far have gone out: a viewer hears 'ended' after the
        last frame, not while the last chunk is still being paced out."""
        def on_loop() -> None:
            if self.buffer.drained:
                self.send(message)
            else:
                self._after_sent = message
        try:
            self.loop.call_soon_threadsafe(on_loop)
        except RuntimeError:
            pass

    def _at_end(self) -> bool:
        return self.rollout.recorded and self.rollout.frame_index >= len(self.rollout.source)

    def _hand_over_parts(self, parts, rendered_at: float, rendered_wall: float) -> float:
        """Hand each part over as the renderer produces it (a flash chunk: each latent frame's frames as soon as
        it is decoded); → the seconds spent rendering, not waiting for the hand-over. After a seek the rest of
        the chunk is stale: still rendered (so the session's state stays whole), not handed over."""
        seeks, render_s = self._seeks, 0.0
        while True:
            t = time.perf_counter()
            part = next(parts, None)
            render_s += time.perf_counter() - t
            if part is None:
                return render_s
            if self._seeks == seeks and not self._stop:
                self._hand_over(part, rendered_at, rendered_wall)

    def _hand_over(self, chunk: list[RenderedFrame], rendered_at: float, rendered_wall: float) -> None:
        seeks = self._seeks
        self.latest_frame = chunk[-1]
        take = self.take
        for f in chunk:
            rgb = stamp_index(f.rgb, f.index) if self.stamp else f.rgb
            video = av.VideoFrame.from_ndarray(rgb, format="rgb24").reformat(format="yuv420p")
            info = {"prompts": [{"preset": p.preset, "text": p.text[:80], "weight": round(p.weight, 4)}
                                for p in f.conditioning.prompts], "label": f.conditioning.label(),
                    "stages_ms": {k: round(v, 2) for k, v in f.chunk_timings_ms.items()},
                    "chunk_size": f.chunk_size, "rendered_wall": rendered_wall}
            if "control" in f.gbuffer.meta:     # the built-in engine: the control this frame was driven with
                info["control"] = f.gbuffer.meta["control"]
            item = OutgoingFrame(f.index, video, rendered_at, info)
            while not self.buffer.put(item, timeout=0.05):
                if self._stop or self.buffer.closed:
                    return
                # Commands only change what the *next* chunk renders, so they can apply while this one drains;
                # after a seek the rest of this chunk is stale.
                self._apply_commands()
                if self._seeks != seeks:
                    return
            if take is not None:   # what was handed to the viewer, in that order
                take.add(f.gbuffer, rgb, f.conditioning, f.index)

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

    def send(self, message: dc.ServerMessage) -> None:
        """Send a message to the browser from any thread; dropped if the channel is not open."""
        channel = self.channel
        if channel is None:
            return
        text = message.text()

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
            if self.observer is not None:
                self.observer.first_frame(sent_at - self.created)
        if self.observer is not None:
            self.observer.frame_sent(sent_at - item.rendered_at)
        fps = self.track.meter.fps
        take = self.take
        status = dc.Status(frame=item.index, **item.info, fps=round(fps, 2), target_fps=self.fps,
                           slow=bool(self.track.frames_sent > 2 * self.fps and fps < 0.9 * self.fps),
                           latency_ms=round((sent_at - item.rendered_at) * 1e3, 1), state=self.state,
                           queued=self.buffer.queued, encode_ms=self._encode_ms(),
                           take=take.info.progress() if take is not None and not take.stopping else None)
        self.last_sent = FrameStatus(item.index, status.label, status.stages_ms, status.latency_ms)
        self.send(status)
        if self._after_sent is not None and self.buffer.drained:
            message, self._after_sent = self._after_sent, None
            if self._ended:          # not after a seek or play that started the source again meanwhile
                self.send(message)
        self.audience.publish(item.video, status)

    def _encode_ms(self) -> float | None:
        ms = getattr(self.encoder, "last_encode_ms", None)
        return None if ms is None else round(ms, 2)

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

    def hello(self, watcher: bool = False) -> dc.Hello:
        """The owner's hello carries the watch key to share; a watcher's does not."""
        return dc.Hello(session_id=self.id, source=self.source_name, renderer=self.renderer_name,
                        width=self.width, height=self.height, fps=self.fps, recorded=self.rollout.recorded,
                        frames=len(self.rollout.source) if self.rollout.recorded else None,
                        live=isinstance(self.rollout.source, LiveSource), codec=self.codec,
                        watch=None if watcher else self.audience.share(), role="watcher" if watcher else None)

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

    def control(self, msg) -> None:
        """A command from outside the page (OSC, REST) as a client message model (`dc.build`): applied like
        one, but a bad one raises its UserError to the caller instead of answering the page."""
        self._dispatch(msg)

    def _dispatch(self, msg) -> None:
        HANDLERS[msg.type](self, msg)

    # ---- message handlers, on the event loop: validate now, queue what touches the rollout ----------------

    @handles("prompt", "preset", "blend")
    def _on_switch_now(self, msg) -> None:
        conditioning = timeline.conditioning_from_message(msg)
        command = lambda: self._switch(conditioning, msg.transition, msg.type)  # noqa: E731
        if timeline.needs_text_matching(conditioning):
            # the text-matching model is still loading: frames go on in the current style meanwhile
            self.send(dc.Preparing(request=msg.type, label=conditioning.label()))
            when_matching_ready(lambda: self.submit(command))
        else:
            self.submit(command)

    @handles("switch")
    def _on_switch_at(self, msg) -> None:
        conditioning = timeline.conditioning_from_specs(msg.prompts, msg.mode)
        self.submit(lambda: self._patch(msg.frame, conditioning, msg.transition))

    @handles("schedule")
    def _on_schedule(self, msg) -> None:
        # parsed by the worker, not here: a 2 KB Parseq export of a million frames takes tens of seconds to
        # evaluate, which on the event loop would freeze every session's video and signalling
        self.submit(lambda: self._replace_schedule(msg))

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
        self._loop_source()
        self.send(dc.Ack(request="loop", on=msg.on))

    @handles("key", "input", "autopilot")
    def _on_input(self, msg) -> None:
        self._require_live(msg.type)
        self.submit(lambda: self._input(msg))

    @handles("stats")
    def _on_stats(self, msg) -> None:
        self.send(self.stats())

    @handles("ping")
    def _on_ping(self, msg) -> None:
        self.send(self.pong(msg.t))

    def pong(self, t: float) -> dc.Pong:
        return dc.Pong(t=t, server_ms=time.time() * 1e3)

    @handles("stamp")
    def _on_stamp(self, msg) -> None:
        if msg.on and not stamp_fits(self.width, self.height):
            raise dc.ProtocolError(f"{self.width}x{self.height} is too small for the frame stamp", "stamp")
        # read per frame as the worker hands frames over: from the next one, which may be one rendered already
        self.stamp = msg.on
        self.send(dc.Ack(request="stamp", on=msg.on))

    @handles("take")
    def _on_take(self, msg) -> None:
        if msg.action == "start":
            self.start_take()
        else:
            self.stop_take()

    # ---- takes -----------------------------------------------------------------------------------------

    def start_take(self) -> dict:
        if self.take is not None and not self.take.stopping:
            raise TakeError(f"take {self.take.info.id} is already recording", "take")
        if self.takes is None:
            raise TakeError("this studio records no takes", "take")
        self.take = self.takes.start(self._take_stopped, source=self.source_name, renderer=self.renderer_name,
                                     width=self.width, height=self.height, fps=self.fps,
                                     seed=self.rollout.session.seed)
        message = dc.Ack(request="take", action="start", **self.take_status())
        self.send(message)
        return message.wire()

    def stop_take(self) -> dict:
        take = self.take
        if take is None or take.stopping:
            raise TakeError("no take is recording", "take")
        take.stop()
        message = dc.Ack(request="take", action="stop", **self.take_status())
        self.send(message)
        return message.wire()

    def take_status(self) -> dict:
        take = self.take
        if take is None:
            return {"recording": False}
        info = take.info
        return {"recording": not take.stopping, "take_id": info.id, **info.progress(), "path": str(info.path)}

    def _take_stopped(self, info) -> None:
        """From the take's writer thread, once its files are closed."""
        self.send(dc.TakeStopped(take_id=info.id, frames=info.frames, path=str(info.path),
                                 reason=info.stopped_because))

    def _require_recorded(self, what: str) -> None:
        if not self.rollout.recorded:
            raise dc.ProtocolError(f"'{what}' needs a recorded source; {self.source_name} is live", what)

    def _require_live(self, what: str) -> None:
        if not isinstance(self.rollout.source, LiveSource):
            raise dc.ProtocolError(f"'{what}' needs a live source; {self.source_name} is recorded", what)

    # ---- commands, run by the worker between chunks --------------------------------------------------------

    def _switch(self, conditioning, transition: int, request: str) -> dc.Ack:
        frame = self.rollout.frame_index
        whole_loop = self.timeline.switch(frame, conditioning, transition)
        return dc.Ack(request=request, frame=frame, transition=transition, label=conditioning.label(),
                      whole_loop=whole_loop)

    def _loop_source(self) -> None:
        """A recorded source played in a loop makes the timeline loop too (docs/ui.md)."""
        recorded = self.rollout.recorded and self.loop_playback
        self.timeline.source_loop = len(self.rollout.source) if recorded else None

    def _patch(self, frame: int, conditioning, transition: int) -> dc.Ack:
        self.timeline.patch(frame, conditioning, transition)
        return dc.Ack(request="switch", frame=frame, transition=transition, label=conditioning.label())

    def _replace_schedule(self, msg) -> dc.ServerMessage:
        try:
            schedule = timeline.schedule_from_message(msg)
        except UserError as exc:     # answered as the schedule's error, so the page knows which edit failed
            self.errors += 1
            return dc.error_message(exc, "schedule")
        self.timeline.replace(schedule)
        return dc.Ack(request="schedule", frame=self.rollout.frame_index)

    def _set_paused(self, paused: bool) -> dc.Ack:
        self._paused = paused
        if not paused and self._ended and self.rollout.recorded:
            self.rollout.seek(0)
            self._ended = False
        self.state = "paused" if paused else ("ended" if self._ended else "playing")
        return dc.Ack(request="pause" if paused else "play", frame=self.rollout.frame_index)

    def _seek(self, frame: int) -> dc.Ack:
        self.rollout.seek(frame)
        self._seeks += 1
        self.buffer.clear()
        self._ended = False
        if not self._paused:
            self.state = "playing"
        return dc.Ack(request="seek", frame=frame)

    def _input(self, msg) -> dc.Ack | None:
        source = self.rollout.source
        if msg.type == "autopilot":
            if not hasattr(source, "autopilot"):
                raise dc.ProtocolError(f"{self.source_name} has no autopilot", "autopilot")
            source.autopilot = msg.on
            return dc.Ack(request="autopilot", on=msg.on)
        if msg.type == "key":
            player_input = self.keys.press(msg.key, msg.down)
        else:
            player_input = timeline.player_input(msg)
        if hasattr(source, "autopilot"):
            source.autopilot = False  # a driver took the wheel
        source.apply_input(player_input)
        return None

    # ---- reporting ---------------------------------------------------------------------------------------

    def stats(self) -> dc.StatsReport:
        return dc.StatsReport(session_id=self.id, state=self.state, frame=self.rollout.frame_index,
                              frames_sent=self.track.frames_sent, fps=round(self.track.meter.fps, 2),
                              target_fps=self.fps, codec=self.codec,
                              bitrate=getattr(self.encoder, "target_bitrate", None), errors=self.errors,
                              time_to_first_frame_ms=None if self.first_frame_sent is None else
                              round((self.first_frame_sent - self.created) * 1e3, 1),
                              last=asdict(self.last_sent))
