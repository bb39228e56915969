"""A live session's worker: the render loop, in a thread of its own, that hands each rendered frame over
(studio/server/handover.py) to the video track.

The rollout (source, timeline, render session) belongs to this thread alone: it is the timeline's only writer
(`LiveTimeline.bind_writer`). What the event loop asks of the session arrives as commands
(studio/server/control.py) on the `CommandQueue` and runs between chunks (while a chunk waits for room in the
hand-over, too), which is why a live prompt switch takes effect at the next chunk.

A session that overlaps chunks (RenderSession.overlaps_chunks) renders in two stages: this thread begins each
chunk and a second one (studio/server/chunk_stage.py) finishes it and hands it over; commands stay on this one.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from dataclasses import dataclass
from typing import Callable

from alaya_errors import UserError
from gbuffer.source import LiveSource
from timeline.rollout import RenderedFrame, Rollout
from timeline.schedule.live import LiveTimeline
from studio.server.chunk_stage import ChunkStage
from studio.server.handover import EngineSink, FrameHandOver, FrameSink
from studio.server.metrics import SessionObserver
from studio.server.outbox import Outbox
from studio.server.reports import ChunkClock
from studio.server.take_control import TakeControl
from webrtc import protocol as dc
from webrtc.track import FrameBuffer

log = logging.getLogger("alaya.session")
Job = Callable[[], object]     # a command (control.py's), run on this thread; it answers whoever asked itself

__all__ = ["CommandQueue", "FrameSink", "Playback", "SessionWorker"]


class CommandQueue:
    """Commands from the event loop to the worker: put from any thread, run on the worker's between chunks."""

    def __init__(self) -> None:
        self._jobs: queue.SimpleQueue[Job] = queue.SimpleQueue()
        self.wake = threading.Event()      # set by a command (or a stop): a paused worker looks at once

    def put(self, job: Job) -> None:
        self._jobs.put(job)
        self.wake.set()

    def run_all(self) -> None:
        while True:
            try:
                job = self._jobs.get_nowait()
            except queue.Empty:
                return
            job()

    def doze(self, timeout_s: float) -> None:
        """A paused or ended session: wait for a command (or `timeout_s`)."""
        self.wake.wait(timeout_s)
        self.wake.clear()


@dataclass
class Playback:
    """Where the session's playback stands; written on the worker (`stopping` and `state` by `stop` too)."""

    state: str = "starting"          # starting → playing / paused / ended → closed
    loop: bool = True                # a recorded source starts again at its end
    paused: bool = False
    ended: bool = False
    stopping: bool = False
    seeks: int = 0                   # counts seeks: a chunk rendered before one is stale
    after_sent: dc.Ended | None = None   # to send once the frames now buffered have gone out
    failed: bool = False             # the session's one fatal error was sent


class SessionWorker:
    def __init__(self, name: str, rollout: Rollout, timeline: LiveTimeline, buffer: FrameBuffer, outbox: Outbox,
                 takes: TakeControl, *, stamp: bool, loop_playback: bool, observer: SessionObserver | None,
                 on_ended: Callable[[], None], sink: FrameSink | None = None):
        self.rollout, self.timeline, self.outbox = rollout, timeline, outbox
        self.handover = FrameHandOver(buffer, takes, stamp=stamp, sink=EngineSink(sink) if sink else None,
                                      observer=observer)
        self.commands = CommandQueue()
        self.playback = Playback()
        self.on_ended = on_ended        # called from this thread when the session ended on its own
        # called from this thread right before each chunk: → timeline frames it moved a timed switch to
        self.before_chunk: Callable[[], list[int]] = list
        self._fail_lock = threading.Lock()   # the session's one fatal error is sent once (fail())
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self.stage: ChunkStage | None = None     # the second stage, once started (start())
        self.set_loop(loop_playback)    # before the thread starts: the timeline has no writer yet

    @property
    def state(self) -> str:
        return self.playback.state

    @property
    def buffer(self) -> FrameBuffer:
        return self.handover.buffer

    # ---- lifecycle -------------------------------------------------------------------------------------

    def start(self) -> None:
        self.playback.state = "playing"
        if self.handover.sink is None and self.rollout.session.overlaps_chunks:   # an engine paces its own
            self.stage = ChunkStage(f"{self._thread.name}-finish")
        self._thread.start()

    def stop(self) -> None:
        self.playback.state = "closed"
        self.playback.stopping = True
        self.commands.wake.set()
        self.buffer.close()
        if isinstance(self.rollout.source, LiveSource):
            self.rollout.source.interrupt()   # a feed that went quiet: its read ends now, not at its timeout

    def join(self, timeout_s: float) -> bool:
        """Blocking, after stop(): → False if the thread did not stop in time."""
        if self._thread.ident is not None:
            self._thread.join(timeout_s)
        return not self._thread.is_alive()

    def submit(self, job: Job) -> None:
        self.commands.put(job)

    def fail(self, exc: UserError) -> bool:
        """End the session with one error message (from this thread, or from outside: its render worker died
        while it was paused); → False when it had already failed (the viewer hears it once)."""
        with self._fail_lock:
            if self.playback.failed:
                return False
            self.playback.failed = True
        self.playback.state = "ended"
        self.outbox.send(dc.error_message(exc))
        return True

    # ---- the loop ------------------------------------------------------------------------------------------

    def _run(self) -> None:
        self.timeline.bind_writer()
        play = self.playback
        try:
            while not play.stopping:
                if self.stage is not None:
                    self.stage.raise_error()
                self.commands.run_all()
                if play.paused or play.ended:
                    self.commands.doze(0.1)
                    continue
                sink = self.handover.sink
                if sink is None and not self.buffer.wait_to_render(0.05):
                    continue   # render just in time: its lead before its frame's slot (commands apply on each turn)
                if sink is not None and not sink.frame_ready(self.rollout.source):
                    continue   # an engine's session waits for its next frame here, where commands still apply
                # commands that came during the wait reach the frame rendered now, not the one after: a switch
                # lands a frame sooner
                self.commands.run_all()
                if play.stopping or play.paused or play.ended or self.handover.sink is not sink:
                    continue
                if self.timeline.advance(self.rollout.frame_index):
                    self.outbox.send(dc.TimelineChanged(frame=self.rollout.frame_index,
                                                        reason="next pass of the loop"))
                for frame in self.before_chunk():
                    self.outbox.send(dc.TimelineChanged(frame=frame, reason="a timed switch placed again"))
                clock = ChunkClock.now()
                count = self._begin_in_stages(clock) if self.stage is not None else self._render(clock)
                if count:
                    continue
                if play.stopping:       # stopped while its source waited for a frame: not the source's end
                    break
                if play.loop and self.rollout.recorded:
                    continue
                if self._source_ended():
                    break
        except UserError as exc:
            self.fail(exc)
        except Exception as exc:  # a renderer/source bug: end this session only, keep the server up
            log.exception("%s: worker failed", self._thread.name)
            play.state = "ended"
            self.outbox.send(dc.Error(message=f"internal error: {type(exc).__name__}: {exc}", where="session",
                                      request=None))
        finally:
            if self.stage is not None and not self.stage.close(30.0):   # its last frames out first
                log.warning("%s: the chunk under way did not finish in time", self._thread.name)
            self.buffer.close()
            if play.state == "ended":
                self.on_ended()

    def _current(self, seeks: int) -> Callable[[], bool]:
        """Whether a chunk taken when `seeks` seeks had been made is still wanted."""
        return lambda: self.playback.seeks == seeks and not self.playback.stopping

    def _render(self, clock: ChunkClock) -> int:
        """One chunk, rendered and handed over on this thread; → its frames (0: the source had none)."""
        current = self._current(self.playback.seeks)
        count, parts = self.rollout.next_chunk_parts()
        clock.take_s = self.rollout.take_s
        self._after_take()
        if count:
            rendered_s, first_s = self.handover.parts(parts, clock, current, waiting=self.commands.run_all)
            self.handover.note_chunk(count, rendered_s, clock.lead_s(first_s), rendered_s)
        return count

    def _begin_in_stages(self, clock: ChunkClock) -> int:
        """Begin a chunk here and hand its rest to the second stage; → its frames (0: the source had none).
        The next chunk's history work follows at once, while the stage decodes this one."""
        current = self._current(self.playback.seeks)
        count, parts = self.rollout.begin_chunk()
        clock.take_s = self.rollout.take_s
        self._after_take()
        if not count:
            return 0
        begun_s = time.perf_counter() - clock.started
        self.buffer.promise(count)

        def finish() -> None:     # on the second stage, which leaves commands to this thread
            owed = [count]
            try:
                rendered_s, first_s = self.handover.parts(parts, clock, current, owed=owed)
            finally:
                self.buffer.settle(owed[0])      # those not put: stale after a seek, or the session stopped
            # the stream's rate is the larger stage's; the first frame waits for both
            self.handover.note_chunk(count, max(begun_s, rendered_s), clock.lead_s(begun_s + first_s),
                                     begun_s + rendered_s)
        assert self.stage is not None
        if not self.stage.submit(finish, lambda: self.playback.stopping):
            self.buffer.settle(count)
            return count
        self.rollout.session.between_chunks()
        return count

    def _after_take(self) -> None:
        if self.playback.loop and self._at_end():
            self.rollout.seek(0)  # now, so a switch applied next lands on the frame played next

    def _source_ended(self) -> bool:
        """→ True when the loop ends with it: a live source that ends (a feed that went away) does not come
        back. A recorded one stays (seek, play); its viewer hears 'ended' after the last frame."""
        self.playback.ended = True
        self.playback.state = "ended"
        ended = dc.Ended(frame=self.rollout.frame_index, reason="the source ended")
        if not self.rollout.recorded:
            self.outbox.send(ended)   # now: the session closes right after, its last frames with it
            return True

        def on_loop() -> None:
            if self.buffer.drained:
                self.outbox.send(ended)
            else:
                self.playback.after_sent = ended
        self.outbox.later(on_loop)
        return False

    def frame_sent(self) -> None:
        """On the event loop, after each frame's status: the 'ended' held back until the last frame went."""
        if self.playback.after_sent is not None and self.buffer.drained:
            message, self.playback.after_sent = self.playback.after_sent, None
            if self.playback.ended:   # not after a seek or play that started the source again meanwhile
                self.outbox.send(message)

    def _at_end(self) -> bool:
        length = self.rollout.recorded_length
        return length is not None and self.rollout.frame_index >= length

    @property
    def latest_frame(self) -> RenderedFrame | None:
        return self.handover.latest_frame

    # ---- commands (run on this thread, between chunks) --------------------------------------------------

    def set_loop(self, on: bool) -> dc.Ack:
        """A recorded source played in a loop starts again at its end, and makes the timeline loop too."""
        self.playback.loop = on
        self.timeline.source_loop = self.rollout.recorded_length if on else None
        return dc.Ack(request="loop", on=on)

    def set_paused(self, paused: bool) -> dc.Ack:
        play = self.playback
        play.paused = paused
        if not paused and play.ended and self.rollout.recorded:
            self.rollout.seek(0)
            play.ended = False
        play.state = "paused" if paused else ("ended" if play.ended else "playing")
        return dc.Ack(request="pause" if paused else "play", frame=self.rollout.frame_index)

    def seek(self, frame: int) -> dc.Ack:
        self.rollout.seek(frame)
        self.playback.seeks += 1
        self.buffer.clear()
        self.playback.ended = False
        if not self.playback.paused:
            self.playback.state = "playing"
        return dc.Ack(request="seek", frame=frame)
