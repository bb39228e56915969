"""A live session's worker: the render loop, in a thread of its own, and the hand-over of each rendered frame
to the video track.

The rollout (source, timeline, render session) belongs to this thread alone. Requests from the event loop that
touch it are queued as commands and applied between chunks (while a chunk waits for room in the hand-over,
too), which is why a live prompt switch takes effect at the next chunk.

A session that overlaps chunks (RenderSession.overlaps_chunks) renders in two stages: this thread begins each
chunk and a second one (studio/server/chunk_stage.py) finishes it and hands it over; commands stay on this one.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from typing import Callable

import av
import numpy as np

from alaya_errors import UserError
from gbuffer.source import LiveSource
from timeline.rollout import RenderedFrame, Rollout
from timeline.schedule.live import LiveTimeline
from studio.server.chunk_stage import ChunkStage
from studio.server.metrics import SessionObserver
from studio.server.outbox import Outbox
from studio.server.reports import ChunkClock, frame_info
from studio.server.take_control import TakeControl
from webrtc import protocol as dc
from webrtc.stamp import stamp_index
from webrtc.track import FrameBuffer, OutgoingFrame

log = logging.getLogger("alaya.session")
Command = Callable[[], "dc.ServerMessage | None"]     # run by the worker; its answer is sent
FrameSink = Callable[[RenderedFrame, np.ndarray], None]   # a rendered frame and its RGB as handed over


class SessionWorker:
    def __init__(self, name: str, rollout: Rollout, timeline: LiveTimeline, buffer: FrameBuffer, outbox: Outbox,
                 takes: TakeControl, *, stamp: bool, loop_playback: bool, observer: SessionObserver | None,
                 on_ended: Callable[[], None], sink: FrameSink | None = None):
        self.rollout, self.timeline, self.buffer, self.outbox, self.takes = rollout, timeline, buffer, outbox, takes
        # An engine's own session (studio/server/engine_link.py): each frame goes to the engine as it is rendered,
        # and the engine's frames pace the session; the video track (watchers) takes the newest, never waited for.
        self.sink = sink
        self.stamp = stamp              # read per frame as frames are handed over
        self.observer = observer
        self.on_ended = on_ended        # called from this thread when the session ended on its own
        self.state = "starting"         # starting → playing / paused / ended → closed
        # The newest rendered frame (G-buffer + output), for the inspector; replaced whole, so readers on other
        # threads always see a complete frame.
        self.latest_frame: RenderedFrame | None = None
        self._commands: queue.SimpleQueue[Command] = queue.SimpleQueue()
        self._wake = threading.Event()
        self._paused = self._ended = self._stop = False
        self._seeks = 0                 # counts seeks: a chunk rendered before one is stale
        self._after_sent: dc.Ended | None = None   # to send once the frames now buffered have gone out
        self._failed = False            # the session's one fatal error was sent
        self._fail_lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self.stage: ChunkStage | None = None     # the second stage, once started (start())
        self.set_loop(loop_playback)

    # ---- lifecycle -------------------------------------------------------------------------------------

    def start(self) -> None:
        self.state = "playing"
        if self.sink is None and self.rollout.session.overlaps_chunks:   # an engine's frames pace its own session
            self.stage = ChunkStage(f"{self._thread.name}-finish")
        self._thread.start()

    def stop(self) -> None:
        self.state = "closed"
        self._stop = True
        self._wake.set()
        self.buffer.close()
        if isinstance(self.rollout.source, LiveSource):
            self.rollout.source.interrupt()   # a feed that went quiet: its read ends now, not at its timeout

    def join(self, timeout_s: float) -> bool:
        """Blocking, after stop(): → False if the thread did not stop in time."""
        if self._thread.ident is not None:
            self._thread.join(timeout_s)
        return not self._thread.is_alive()

    def submit(self, command: Command) -> None:
        self._commands.put(command)
        self._wake.set()

    def fail(self, exc: UserError) -> bool:
        """End the session with one error message (from this thread, or from outside: its render worker died
        while it was paused); → False when it had already failed (the viewer hears it once)."""
        with self._fail_lock:
            if self._failed:
                return False
            self._failed = True
        self.state = "ended"
        self.outbox.send(dc.error_message(exc))
        return True

    # ---- the loop ------------------------------------------------------------------------------------------

    def _run(self) -> None:
        try:
            while not self._stop:
                if self.stage is not None:
                    self.stage.raise_error()
                self._apply_commands()
                if self._paused or self._ended:
                    self._wake.wait(0.1)
                    self._wake.clear()
                    continue
                if self.timeline.advance(self.rollout.frame_index):
                    self.outbox.send(dc.TimelineChanged(frame=self.rollout.frame_index,
                                                        reason="next pass of the loop"))
                if self.sink is None and not self.buffer.wait_to_render(0.05):
                    continue   # render just in time: once the frames waiting go out as it renders (commands apply)
                if self.sink is not None and not self._engine_frame_ready():
                    continue   # an engine's session waits for its next frame here, where commands still apply
                clock = ChunkClock.now()
                count = self._begin_in_stages(clock) if self.stage is not None else self._render(clock)
                if count:
                    continue
                if self._stop:          # stopped while its source waited for a frame: not the source's end
                    break
                if self.loop_playback and self.rollout.recorded:
                    continue
                if self._source_ended():
                    break
        except UserError as exc:
            self.fail(exc)
        except Exception as exc:  # a renderer/source bug: end this session only, keep the server up
            log.exception("%s: worker failed", self._thread.name)
            self.state = "ended"
            self.outbox.send(dc.Error(message=f"internal error: {type(exc).__name__}: {exc}", where="session",
                                      request=None))
        finally:
            if self.stage is not None and not self.stage.close(30.0):   # its last frames out first
                log.warning("%s: the chunk under way did not finish in time", self._thread.name)
            self.buffer.close()
            if self.state == "ended":
                self.on_ended()

    def _render(self, clock: ChunkClock) -> int:
        """One chunk, rendered and handed over on this thread; → its frames (0: the source had none)."""
        count, parts = self.rollout.next_chunk_parts()
        clock.take_s = self.rollout.take_s
        self._after_take()
        if count:
            rendered_s, first_s = self._hand_over_parts(parts, clock, self._seeks)
            self._note_chunk(count, rendered_s, first_s, rendered_s)
        return count

    def _begin_in_stages(self, clock: ChunkClock) -> int:
        """Begin a chunk here and hand its rest to the second stage; → its frames (0: the source had none).
        The next chunk's history work follows at once, while the stage decodes this one."""
        seeks = self._seeks
        count, parts = self.rollout.begin_chunk()
        clock.take_s = self.rollout.take_s
        self._after_take()
        if not count:
            return 0
        begun_s = time.perf_counter() - clock.started
        self.buffer.promise(count)

        def finish() -> None:
            owed = [count]
            try:
                rendered_s, first_s = self._hand_over_parts(parts, clock, seeks, owed)
            finally:
                self.buffer.settle(owed[0])      # those not put: stale after a seek, or the session stopped
            # the stream's rate is the larger stage's; the first frame waits for both
            self._note_chunk(count, max(begun_s, rendered_s), begun_s + first_s, begun_s + rendered_s)
        if not self.stage.submit(finish, lambda: self._stop):
            self.buffer.settle(count)
            return count
        self.rollout.session.between_chunks()
        return count

    def _after_take(self) -> None:
        if self.loop_playback and self._at_end():
            self.rollout.seek(0)  # now, so a switch applied next lands on the frame played next

    def _note_chunk(self, count: int, period_s: float, first_s: float, rendered_s: float) -> None:
        self.buffer.note_production(count, period_s, first_s)
        if self.observer is not None:
            self.observer.chunk_rendered(rendered_s)

    def _engine_frame_ready(self) -> bool:
        source = self.rollout.source
        return not isinstance(source, LiveSource) or source.frame_ready(0.05)

    def _source_ended(self) -> bool:
        """→ True when the loop ends with it: a live source that ends (a feed that went away) does not come
        back. A recorded one stays (seek, play); its viewer hears 'ended' after the last frame."""
        self._ended = True
        self.state = "ended"
        ended = dc.Ended(frame=self.rollout.frame_index, reason="the source ended")
        if not self.rollout.recorded:
            self.outbox.send(ended)   # now: the session closes right after, its last frames with it
            return True

        def on_loop() -> None:
            if self.buffer.drained:
                self.outbox.send(ended)
            else:
                self._after_sent = ended
        self.outbox.later(on_loop)
        return False

    def frame_sent(self) -> None:
        """On the event loop, after each frame's status: the 'ended' held back until the last frame went."""
        if self._after_sent is not None and self.buffer.drained:
            message, self._after_sent = self._after_sent, None
            if self._ended:          # not after a seek or play that started the source again meanwhile
                self.outbox.send(message)

    def _at_end(self) -> bool:
        return self.rollout.recorded and self.rollout.frame_index >= len(self.rollout.source)

    def _apply_commands(self) -> None:
        while True:
            try:
                command = self._commands.get_nowait()
            except queue.Empty:
                return
            try:
                answer = command()
                if answer is not None:
                    self.outbox.send(answer)
            except UserError as exc:
                self.outbox.refuse(exc)

    # ---- the hand-over -----------------------------------------------------------------------------------

    def _hand_over_parts(self, parts, clock: ChunkClock, seeks: int,
                         owed: list[int] | None = None) -> tuple[float, float]:
        """Hand each part over as the renderer produces it (a flash chunk: each latent frame's frames as soon as
        it is decoded); → (the seconds spent rendering, not waiting for the hand-over; those until the first part
        was ready). After a seek (counted from `seeks`, the count when the chunk was taken) the rest of the chunk
        is stale: still rendered (so the session's state stays whole), not handed over. `owed`: on the second
        stage, the chunk's frames promised to the buffer and not put yet (counted down)."""
        render_s, first_s = 0.0, None
        while True:
            t = time.perf_counter()
            part = next(parts, None)
            render_s += time.perf_counter() - t
            if first_s is None:
                first_s = render_s
            if part is None:
                return render_s, first_s
            if self._seeks == seeks and not self._stop:
                self._hand_over(part, clock, seeks, owed)

    def _hand_over(self, chunk: list[RenderedFrame], clock: ChunkClock, seeks: int, owed: list[int] | None) -> None:
        self.latest_frame = chunk[-1]
        take = self.takes.recorder
        for f in chunk:
            rgb = stamp_index(f.rgb, f.index) if self.stamp else f.rgb
            if self.sink is not None:
                self.sink(f, rgb)                # first: the engine waits for it, the watchers' video does not
            video = av.VideoFrame.from_ndarray(rgb, format="rgb24").reformat(format="yuv420p")
            item = OutgoingFrame(f.index, video, clock.started, frame_info(f, clock))
            if self.sink is not None:
                self._put_newest(item)
            elif not self._put(item, seeks, owed):
                return
            if take is not None:   # what was handed to the viewer, in that order
                take.add(f.gbuffer, rgb, f.conditioning, f.index)

    def _put(self, item: OutgoingFrame, seeks: int, owed: list[int] | None) -> bool:
        """Wait for room in the hand-over; False when the session stops or a seek made the chunk stale."""
        while not self.buffer.put(item, timeout=0.05, settles=owed is not None):
            if self._stop or self.buffer.closed:
                return False
            # Commands only change what the *next* chunk renders, so they can apply while this one drains
            # (on this thread; the second stage leaves them to it); after a seek the rest of this chunk is stale.
            if owed is None:
                self._apply_commands()
            if self._seeks != seeks:
                return False
        if owed is not None:
            owed[0] -= 1
        return True

    def _put_newest(self, item: OutgoingFrame) -> None:
        """An engine's session: latest frame wins, the watchers' track is never waited for."""
        if not self.buffer.put(item, timeout=0):
            self.buffer.clear()
            self.buffer.put(item, timeout=0)

    # ---- commands (run on this thread, between chunks) --------------------------------------------------

    def set_loop(self, on: bool) -> None:
        """A recorded source played in a loop starts again at its end, and makes the timeline loop too."""
        self.loop_playback = on
        looped = self.rollout.recorded and on
        self.timeline.source_loop = len(self.rollout.source) if looped else None

    def set_paused(self, paused: bool) -> dc.Ack:
        self._paused = paused
        if not paused and self._ended and self.rollout.recorded:
            self.rollout.seek(0)
            self._ended = False
        self.state = "paused" if paused else ("ended" if self._ended else "playing")
        return dc.Ack(request="pause" if paused else "play", frame=self.rollout.frame_index)

    def seek(self, frame: int) -> dc.Ack:
        self.rollout.seek(frame)
        self._seeks += 1
        self.buffer.clear()
        self._ended = False
        if not self._paused:
            self.state = "playing"
        return dc.Ack(request="seek", frame=frame)

