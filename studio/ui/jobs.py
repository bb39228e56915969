"""Render-to-MP4 jobs started from the UI: the offline renderer in a background thread, with progress.

A job renders the schedule the timeline editor exported, from the same sources a live session can play,
so what was previewed live renders identically offline (same schedule JSON, same renderer, same seed).
"""

from __future__ import annotations

import logging
import threading
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from alaya_errors import UserError
from gbuffer.source import Source
from renderer.base import Renderer
from studio.offline import render_to_mp4
from timeline.rollout import Rollout
from studio.server.planner import SessionPlan

log = logging.getLogger("alaya.ui.jobs")
MAX_JOB_FRAMES = 30 * 60 * 10       # ten minutes of video at 30 fps
MAX_RUNNING = 1                     # rendering competes with live sessions for the same CPU/GPU
KEEP_FINISHED = 8                   # finished jobs (and their MP4s) kept for download; older ones are deleted


class JobError(UserError):
    """A render job that cannot start (one already running, a bad frame count)."""


@dataclass
class RenderJob:
    id: str
    frames: int
    path: Path
    state: str = "running"          # running → done | failed
    done: int = 0
    error: str | None = None
    metrics: dict = field(default_factory=dict)
    owner: object = None            # the visitor who started it (studio.server.access.Visitor)


class RenderJobs:
    def __init__(self, directory: Path, shown: Callable[[str], str] = str):
        """`shown`: what a job's error may say (redact.hide_paths: no server paths)."""
        self.directory = Path(directory)
        self.shown = shown
        self.jobs: dict[str, RenderJob] = {}
        self._lock = threading.Lock()

    def get(self, job_id: str) -> RenderJob | None:
        return self.jobs.get(job_id)

    def start(self, frames: int | None, source: Source, renderer: Renderer, plan: SessionPlan,
              owner: object = None) -> RenderJob:
        """Render `frames` frames (default: the schedule's length) of `source` in a thread; the job owns
        `source` from here on. `plan` gives the schedule, size, fps, seed and the renderer's name."""
        schedule = plan.schedule
        frames = frames or schedule.length
        if frames is None:
            raise JobError("the schedule is open-ended; give 'frames'", "frames")
        if not 1 <= frames <= MAX_JOB_FRAMES:
            raise JobError(f"{frames} is outside 1..{MAX_JOB_FRAMES}", "frames")
        with self._lock:
            self._forget_old()
            if sum(j.state == "running" for j in self.jobs.values()) >= MAX_RUNNING:
                raise JobError("a render is already running; wait for it to finish", "render")
            job_id = uuid.uuid4().hex[:10]
            self.directory.mkdir(parents=True, exist_ok=True)
            job = RenderJob(job_id, frames, self.directory / f"render-{job_id}.mp4", owner=owner)
            self.jobs[job_id] = job

        def run() -> None:
            def progress(_index: int) -> None:
                job.done += 1
            try:
                try:
                    session = renderer.open_session(plan.width, plan.height, plan.seed)
                except BaseException:
                    source.close()
                    raise
                rollout = Rollout(source, schedule, session)
                try:
                    metrics = render_to_mp4(rollout, job.path, frames=frames, fps=plan.fps,
                                            renderer_name=plan.renderer, on_frame=progress)
                finally:
                    rollout.close()
                job.frames = metrics.frames   # a recorded source may end early
                job.metrics = metrics.to_json()
                job.state = "done"
            except UserError as exc:
                job.error, job.state = self.shown(str(exc)), "failed"
            except Exception as exc:          # a renderer bug: this job fails, the studio keeps running
                log.exception("render job %s failed", job_id)
                job.error, job.state = self.shown(f"internal error: {type(exc).__name__}: {exc}"), "failed"

        threading.Thread(target=run, name=f"render-{job_id}", daemon=True).start()
        return job

    def _forget_old(self) -> None:
        finished = [j for j in self.jobs.values() if j.state != "running"]   # in start order (dict order)
        for job in finished[:max(0, len(finished) - KEEP_FINISHED + 1)]:
            job.path.unlink(missing_ok=True)
            del self.jobs[job.id]
