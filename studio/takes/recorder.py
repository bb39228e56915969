"""Recording a take: what a live session played, kept so it can be re-rendered later (another renderer, size).

A take is a folder:
    input.gbuf.zip    the session's input G-buffer frames, in the order played (frame k of the take)
    schedule.json     the conditioning as played, indexed by take frame: every live switch at its frame
    output.mp4        the output as sent to the viewer (fragmented MP4: one-second fragments)
    take.json         source, renderer, size, fps, seed, wall-clock start/stop, frames, timeline frame of each
The session's worker hands frames over without waiting; a writer thread encodes and writes them. Memory is
bounded (QUEUE_FRAMES); if the writer cannot keep up, or the disk fills or fails, recording stops with a message
and the files written so far are closed properly (reserve.py keeps the room for that), so a take is always a
valid, possibly shorter, take. After a hard disk failure output.mp4 may lack up to its last second.
"""

from __future__ import annotations

import errno
import json
import logging
import queue
import shutil
import threading
import time
import uuid
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable

import numpy as np

from alaya_errors import UserError
from gbuffer.formats import GbufZipWriter
from gbuffer.formats.common import write_atomic
from gbuffer.frame import GBufferFrame
from prompt_presets import Conditioning
from timeline.schedule import Schedule
from timeline.schedule.played import as_played
from studio.takes.reserve import DiskReserve
from media.video import Mp4Writer

log = logging.getLogger("alaya.takes")
QUEUE_FRAMES = 64            # frames in flight to the writer (~16 MB at 416x224 with the G-buffer)
DISK_CHECK_S = 1.0           # how often the writer looks at the disk's free space
DEFAULT_MIN_FREE = 256 * 2**20   # a take stops cleanly when its disk has less free space than this
TAKE_META = "take.json"
SCHEDULE = "schedule.json"
INPUT = "input.gbuf.zip"
OUTPUT = "output.mp4"


class TakeError(UserError):
    """A take that cannot start, or a folder that is not a take."""


@dataclass
class TakeInfo:
    id: str
    path: Path
    source: str
    renderer: str
    width: int
    height: int
    fps: float
    seed: int
    started_wall: float = field(default_factory=time.time)
    stopped_wall: float | None = None
    frames: int = 0
    timeline_frames: list[int] = field(default_factory=list)   # timeline frame of each take frame
    stopped_because: str | None = None

    @property
    def shown_path(self) -> str:
        """The take's folder as answers name it: relative to the takes folder's parent, never absolute."""
        return f"{self.path.parent.name}/{self.id}"

    def progress(self) -> dict:
        """What the page shows while recording."""
        return {"frames": self.frames, "seconds": round(time.time() - self.started_wall, 1)}

    def to_json(self) -> dict:
        return {"id": self.id, "source": self.source, "renderer": self.renderer, "width": self.width,
                "height": self.height, "fps": self.fps, "seed": self.seed, "started_wall": self.started_wall,
                "stopped_wall": self.stopped_wall, "frames": self.frames, "timeline_frames": self.timeline_frames,
                "stopped_because": self.stopped_because}


def write_failure(exc: Exception) -> str:
    """What stopped a take's writer, in the page's words."""
    if isinstance(exc, OSError):
        return "the disk is full" if exc.errno == errno.ENOSPC else f"cannot write the take ({exc.strerror or exc})"
    return str(exc)


def schedule_as_played(conditionings: list[Conditioning], fps: float) -> Schedule:
    """What each frame got, as blocks a person can edit: one per run of equal conditioning, and a transition as
    one block with its ramp (`timeline.schedule.played`), so a re-render lands every switch (and every step of a
    transition) on the same frame."""
    return as_played(conditionings, fps)


class TakeRecorder:
    """Records one take of one session. `add` is called by the session's worker and never waits."""

    def __init__(self, folder: Path, info: TakeInfo, on_stopped: Callable[[TakeInfo], None],
                 reserve: DiskReserve, max_bytes: int | None = None):
        self.info = info
        self.max_bytes = max_bytes      # the room the studio's disk quota leaves this take (None: no quota)
        self.folder = folder
        self._reserve = reserve
        self._on_stopped = on_stopped
        # unbounded as a queue, so stop()'s end marker never blocks; add() keeps it to QUEUE_FRAMES frames
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._conditionings: list[Conditioning] = []
        self._stop_reason: str | None = None
        self.stopping = False
        self._thread = threading.Thread(target=self._write, name=f"take-{info.id}", daemon=True)
        self._thread.start()

    @classmethod
    def start(cls, takes_dir: Path, on_stopped: Callable[[TakeInfo], None], *,
              min_free_bytes: int = DEFAULT_MIN_FREE, max_bytes: int | None = None, **fields) -> "TakeRecorder":
        take_id = time.strftime("%Y%m%d-%H%M%S-") + uuid.uuid4().hex[:6]
        folder = Path(takes_dir) / take_id
        try:
            folder.mkdir(parents=True)
        except OSError as exc:
            raise TakeError(f"cannot create the take folder: {exc.strerror}", f"takes/{take_id}") from None
        try:
            reserve = DiskReserve(folder, min_free_bytes)
            if (why := reserve.check(0)) is not None:
                reserve.release()
                raise OSError(why)
        except OSError as exc:
            shutil.rmtree(folder, ignore_errors=True)
            raise TakeError(f"cannot start a take: {exc.strerror or exc}", f"takes/{take_id}") from None
        return cls(folder, TakeInfo(take_id, folder, **fields), on_stopped, reserve, max_bytes)

    def add(self, gbuffer: GBufferFrame, rgb: np.ndarray, conditioning: Conditioning, timeline_frame: int) -> None:
        """From the session's worker: hand one played frame over; stops the take if the writer is behind."""
        if self.stopping:
            return
        if self._queue.qsize() >= QUEUE_FRAMES:
            self.stop(f"the disk could not keep up; the take stopped after {self.info.frames} frames")
            return
        self._queue.put((gbuffer, rgb, conditioning, timeline_frame))

    def stop(self, reason: str | None = None) -> None:
        """Finish the take (from any thread); the writer closes the files and calls `on_stopped`."""
        if self.stopping:
            return
        self.stopping = True
        self._stop_reason = reason
        self._queue.put(None)   # the writer drains what came before, then finishes

    def join(self, timeout: float | None = None) -> None:
        self._thread.join(timeout)

    # ---- writer thread ---------------------------------------------------------------------------------

    def _write(self) -> None:
        info = self.info
        gbuf = mp4 = None
        next_check = time.monotonic() + DISK_CHECK_S
        try:
            gbuf = GbufZipWriter(self.folder / INPUT, fps=info.fps, source=info.source, metadata={"take": info.id})
            mp4 = Mp4Writer(self.folder / OUTPUT, info.width, info.height, info.fps, fragmented=True)
            while (item := self._queue.get()) is not None:
                gbuffer, rgb, conditioning, timeline_frame = item
                gbuf.write(replace(gbuffer, index=info.frames, timestamp=info.frames / info.fps))
                # the input and the schedule always agree; the output may end a little earlier after a failure
                self._conditionings.append(conditioning)
                info.timeline_frames.append(timeline_frame)
                info.frames += 1
                mp4.write(rgb)
                if time.monotonic() >= next_check:
                    next_check = time.monotonic() + DISK_CHECK_S
                    if (why := self._reserve.check(info.frames) or self._over_quota()) is not None:
                        self._stopped_early(f"recording stopped: {why}")
                        break
        except (UserError, OSError) as exc:
            self._stopped_early(f"recording stopped: {write_failure(exc)}")
        finally:
            self._reserve.release()     # its room is what the closing writes below may need
            self._finish(gbuf, mp4)

    def _over_quota(self) -> str | None:
        if self.max_bytes is None:
            return None
        used = sum(p.stat().st_blocks * 512 for p in self.folder.iterdir() if p.is_file())
        return "the studio's disk quota for takes is used up" if used >= self.max_bytes else None

    def _stopped_early(self, reason: str) -> None:
        self._stop_reason = reason
        self.stopping = True
        log.warning("take %s: %s", self.info.id, reason)

    def _finish(self, gbuf: GbufZipWriter | None, mp4: Mp4Writer | None) -> None:
        """Close what was written so it stays valid; keep the complete fragments of an MP4 that cannot be
        finished; drop a file that cannot be saved at all."""
        info = self.info
        for writer in (gbuf, mp4):
            if writer is None:
                continue
            try:
                if info.frames:
                    writer.close()
                else:
                    writer.abort()
            except (UserError, OSError) as exc:
                if writer is mp4 and mp4.salvage():
                    log.warning("take %s: output.mp4 kept up to its last complete fragment", info.id)
                else:
                    writer.abort()
                self._stop_reason = self._stop_reason or f"recording stopped: {exc}"
        info.stopped_wall = time.time()
        info.stopped_because = self._stop_reason
        try:
            if self._conditionings:
                write_atomic(self.folder / SCHEDULE,
                             json.dumps(schedule_as_played(self._conditionings, info.fps).to_json(), indent=1)
                             .encode())
            write_atomic(self.folder / TAKE_META, json.dumps(info.to_json(), indent=1).encode())
        except OSError as exc:
            info.stopped_because = info.stopped_because or f"recording stopped: {exc}"
        self._on_stopped(info)
