"""Takes: what a live session played, recorded so it can be re-rendered later (another renderer, another size).

A take is a folder:
    input.gbuf.zip    the session's input G-buffer frames, in the order played (frame k of the take)
    schedule.json     the conditioning as played, indexed by take frame: every live switch at its frame
    output.mp4        the output as sent to the viewer
    take.json         source, renderer, size, fps, seed, wall-clock start/stop, frames, timeline frame of each
The session's worker hands frames over without waiting; a writer thread encodes and writes them. Memory is
bounded (QUEUE_FRAMES); if the writer cannot keep up, or the disk fails, recording stops with a message and the
files written so far are closed properly, so a take is always a valid (possibly shorter) take.
"""

from __future__ import annotations

import json
import logging
import queue
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
from studio.schedule import PromptSpec, Schedule
from studio.video import Mp4Writer

log = logging.getLogger("alaya.takes")
QUEUE_FRAMES = 64            # frames in flight to the writer (~16 MB at 416x224 with the G-buffer)
TAKE_META = "take.json"


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

    def progress(self) -> dict:
        """What the page shows while recording."""
        return {"frames": self.frames, "seconds": round(time.time() - self.started_wall, 1)}

    def to_json(self) -> dict:
        return {"id": self.id, "source": self.source, "renderer": self.renderer, "width": self.width,
                "height": self.height, "fps": self.fps, "seed": self.seed, "started_wall": self.started_wall,
                "stopped_wall": self.stopped_wall, "frames": self.frames, "timeline_frames": self.timeline_frames,
                "stopped_because": self.stopped_because}


def schedule_as_played(conditionings: list[Conditioning], fps: float) -> Schedule:
    """One segment per run of equal conditioning, cut at its first frame: exactly what each frame got, so a
    re-render lands every switch (and every step of a transition) on the same frame."""
    segments = []
    for k, cond in enumerate(conditionings):
        if k == 0 or cond != conditionings[k - 1]:
            segments.append({"start": k, "mode": cond.mode,
                             "prompts": [PromptSpec.from_weighted(p).model_dump(exclude_none=True)
                                         for p in cond.prompts]})
    return Schedule.build({"fps": fps, "length": max(1, len(conditionings)), "segments": segments})


class TakeRecorder:
    """Records one take of one session. `add` is called by the session's worker and never waits."""

    def __init__(self, folder: Path, info: TakeInfo, on_stopped: Callable[[TakeInfo], None]):
        self.info = info
        self.folder = folder
        self._on_stopped = on_stopped
        self._queue: queue.Queue = queue.Queue(QUEUE_FRAMES)
        self._conditionings: list[Conditioning] = []
        self._stop_reason: str | None = None
        self.stopping = False
        self._thread = threading.Thread(target=self._write, name=f"take-{info.id}", daemon=True)
        self._thread.start()

    @classmethod
    def start(cls, takes_dir: Path, on_stopped: Callable[[TakeInfo], None], **fields) -> "TakeRecorder":
        take_id = time.strftime("%Y%m%d-%H%M%S-") + uuid.uuid4().hex[:6]
        folder = Path(takes_dir) / take_id
        try:
            folder.mkdir(parents=True)
        except OSError as exc:
            raise TakeError(f"cannot create the take folder: {exc.strerror}", str(folder)) from None
        return cls(folder, TakeInfo(take_id, folder, **fields), on_stopped)

    def add(self, gbuffer: GBufferFrame, rgb: np.ndarray, conditioning: Conditioning, timeline_frame: int) -> None:
        """From the session's worker: hand one played frame over; stops the take if the writer is behind."""
        if self.stopping:
            return
        try:
            self._queue.put_nowait((gbuffer, rgb, conditioning, timeline_frame))
        except queue.Full:
            self.stop(f"the disk could not keep up; the take stopped after {self.info.frames} frames")

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
        try:
            gbuf = GbufZipWriter(self.folder / "input.gbuf.zip", fps=info.fps, source=info.source,
                                 metadata={"take": info.id})
            mp4 = Mp4Writer(self.folder / "output.mp4", info.width, info.height, info.fps)
            while (item := self._queue.get()) is not None:
                gbuffer, rgb, conditioning, timeline_frame = item
                gbuf.write(replace(gbuffer, index=info.frames, timestamp=info.frames / info.fps))
                mp4.write(rgb)
                self._conditionings.append(conditioning)
                info.timeline_frames.append(timeline_frame)
                info.frames += 1
        except (UserError, OSError) as exc:
            self._stop_reason = f"recording stopped: {exc}"
            self.stopping = True
            log.warning("take %s: %s", info.id, self._stop_reason)
        finally:
            self._finish(gbuf, mp4)

    def _finish(self, gbuf, mp4) -> None:
        """Close what was written so it stays valid; drop a file that cannot be finished."""
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
                writer.abort()
                self._stop_reason = self._stop_reason or f"recording stopped: {exc}"
        info.stopped_wall = time.time()
        info.stopped_because = self._stop_reason
        try:
            if self._conditionings:
                write_atomic(self.folder / "schedule.json",
                             json.dumps(schedule_as_played(self._conditionings, info.fps).to_json(), indent=1)
                             .encode())
            write_atomic(self.folder / TAKE_META, json.dumps(info.to_json(), indent=1).encode())
        except OSError as exc:
            info.stopped_because = info.stopped_because or f"recording stopped: {exc}"
        self._on_stopped(info)


def is_take(path: str | Path) -> bool:
    return (Path(path) / TAKE_META).is_file()


def open_take(path: str | Path) -> tuple[dict, Path, Schedule]:
    """A take folder → (its take.json, its input recording, its schedule as played)."""
    folder = Path(path)
    try:
        meta = json.loads((folder / TAKE_META).read_text())
        schedule = Schedule.from_json(json.loads((folder / "schedule.json").read_text()), str(folder))
    except FileNotFoundError as exc:
        raise TakeError(f"not a complete take: {Path(exc.filename).name} is missing", str(folder)) from None
    except (OSError, json.JSONDecodeError) as exc:
        raise TakeError(f"cannot read the take: {exc}", str(folder)) from None
    if not isinstance(meta, dict) or not isinstance(meta.get("width"), int):
        raise TakeError("take.json is not a take's metadata", str(folder))
    return meta, folder / "input.gbuf.zip", schedule
