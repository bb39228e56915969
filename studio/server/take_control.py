"""A session's take: starting and stopping the recording of what the viewer is shown (docs/presenting.md).
The worker hands each frame it gives the viewer to `recorder`; the recorder's own thread writes the files."""

from __future__ import annotations

import asyncio

from studio.server.outbox import Outbox
from studio.takes import TakeError, TakeRecorder, TakeStarter
from webrtc import protocol as dc


class TakeControl:
    def __init__(self, store: TakeStarter | None, outbox: Outbox, **facts):
        self.store = store
        self.outbox = outbox
        self.facts = facts              # source, renderer, width, height, fps, seed: written into the take
        self.recorder: TakeRecorder | None = None    # the take being recorded (or last recorded), if any

    def start(self) -> dc.Ack:
        """→ the ack (the session's control sends it to whoever asked)."""
        if self.recorder is not None and not self.recorder.stopping:
            raise TakeError(f"take {self.recorder.info.id} is already recording", "take")
        if self.store is None:
            raise TakeError("this studio records no takes", "take")
        self.recorder = self.store.start(self._stopped, **self.facts)
        return self._ack("start")

    def stop(self) -> dc.Ack:
        if self.recorder is None or self.recorder.stopping:
            raise TakeError("no take is recording", "take")
        self.recorder.stop()
        return self._ack("stop")

    def progress(self) -> dict | None:
        """Frames and seconds recorded so far, while a take records (each frame's status carries it)."""
        take = self.recorder
        return take.info.progress() if take is not None and not take.stopping else None

    async def finish(self, loop: asyncio.AbstractEventLoop) -> None:
        """The session ended and its worker is gone: the take has all it will get."""
        if self.recorder is not None:
            self.recorder.stop("the session ended")
            await loop.run_in_executor(None, self.recorder.join, 30)

    def _ack(self, action: str) -> dc.Ack:
        return dc.Ack(request="take", **self.status(action).model_dump())

    def status(self, action: str | None = None) -> dc.TakeStatus:
        take = self.recorder
        if take is None:
            return dc.TakeStatus(action=action, recording=False)
        info = take.info
        return dc.TakeStatus(action=action, recording=not take.stopping, take_id=info.id, **info.progress(),
                             path=info.shown_path)

    def _stopped(self, info) -> None:
        """From the take's writer thread, once its files are closed."""
        self.outbox.send(dc.TakeStopped(take_id=info.id, frames=info.frames, path=info.shown_path,
                                        reason=info.stopped_because))
