"""Render-to-MP4 jobs started from the UI: the offline renderer in a background thread, with progress.

A job renders the schedule the timeline editor exported, from the same sources a live session can play,
so what was previewed live renders identically offline (same schedule JSON, same renderer, same seed).
One job renders at a time; the others wait their turn in a small queue (docs/ui.md, "Render to MP4"): bounded
in all (MAX_WAITING) and per visitor (one job waiting or rendering each), so nobody can grow it without bound
or fill it alone.
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
from studio.server.access import QuotaFull
from timeline.rollout import Rollout
from studio.server.planner import SessionPlan

log = logging.getLogger("alaya.ui.jobs")
MAX_JOB_FRAMES = 30 * 60 * 10       # ten minutes of video at 30 fps
MAX_RUNNING = 1                     # rendering competes with live sessions for the same CPU/GPU
MAX_WAITING = 4                     # jobs waiting their turn, all visitors together
PER_VISITOR = 1                     # jobs one visitor may have waiting or rendering (the admin: any, up to the bound)
KEEP_FINISHED = 8                   # finished jobs (and their MP4s) kept for download; older ones are deleted


class JobError(UserError):
    """A render job that cannot start (a bad frame count, an open-ended schedule)."""


class QueueFull(QuotaFull):
    """No room for another job: the queue is full, or the visitor has one waiting or rendering already (429)."""

    def __init__(self, detail: str):
        super().__init__(detail, "render", 429)


@dataclass
class RenderJob:
    id: str
    frames: int
    path: Path
    state: str = "waiting"          # waiting → running → done | failed
    done: int = 0
    error: str | None = None
    metrics: dict = field(default_factory=dict)
    owner: object = None            # the visitor who started it (studio.server.access.Visitor)
    work: Callable[[], None] | None = field(default=None, repr=False)   # what it runs when its turn comes

    @property
    def unfinished(self) -> bool:
        return self.state in ("waiting", "running")


class RenderJobs:
    def __init__(self, directory: Path, shown: Callable[[str], str] = str):
        """`shown`: what a job's error may say (redact.hide_paths: no server paths)."""
        self.directory = Path(directory)
        self.shown = shown
        self.jobs: dict[str, RenderJob] = {}
        self._lock = threading.Lock()

    def get(self, job_id: str) -> RenderJob | None:
        return self.jobs.get(job_id)

    def position(self, job: RenderJob) -> int | None:
        """A waiting job's place in the queue: 1 = it renders next; None once it renders or has ended."""
        with self._lock:
            waiting = [j.id for j in self.jobs.values() if j.state == "waiting"]   # in start order (dict order)
        return waiting.index(job.id) + 1 if job.id in waiting else None

    def start(self, frames: int | None, source: Source, renderer: Renderer, plan: SessionPlan,
              owner: object = None) -> RenderJob:
        """Render `frames` frames (default: the schedule's length) of `source` in a thread, now or when the jobs
        ahead of it have finished; the job owns `source` from here on (QueueFull: it does not, nothing queued).
        `plan` gives the schedule, size, fps, seed and the renderer's name."""
        schedule = plan.schedule
        frames = frames or schedule.length
        if frames is None:
            raise JobError("the schedule is open-ended; give 'frames'", "frames")
        if not 1 <= frames <= MAX_JOB_FRAMES:
            raise JobError(f"{frames} is outside 1..{MAX_JOB_FRAMES}", "frames")
        with self._lock:
            self._forget_old()
            self._check_room(owner)
            job_id = uuid.uuid4().hex[:10]
            self.directory.mkdir(parents=True, exist_ok=True)
            job = RenderJob(job_id, frames, self.directory / f"render-{job_id}.mp4", owner=owner)
            job.work = lambda: self._render(job, source, renderer, plan)
            self.jobs[job_id] = job
            self._start_next()
        return job

    def _check_room(self, owner: object) -> None:
        unfinished = [j for j in self.jobs.values() if j.unfinished]
        if owner is not None and not getattr(owner, "admin", False) and \
                sum(j.owner is owner for j in unfinished) >= PER_VISITOR:
            raise QueueFull("you have a render waiting or rendering already: wait for it to finish, then start "
                            "the next")
        if sum(j.state == "waiting" for j in unfinished) >= MAX_WAITING:
            raise QueueFull(f"the render queue is full ({MAX_WAITING} renders are waiting their turn): try again "
                            "when one has finished")

    def _start_next(self) -> None:
        """Under the lock: start waiting jobs, in order, while fewer than MAX_RUNNING render."""
        while sum(j.state == "running" for j in self.jobs.values()) < MAX_RUNNING:
            job = next((j for j in self.jobs.values() if j.state == "waiting"), None)
            if job is None:
                return
            job.state = "running"
            work, job.work = job.work, None
            threading.Thread(target=self._run, args=(job, work), name=f"render-{job.id}", daemon=True).start()

    def _run(self, job: RenderJob, work: Callable[[], None]) -> None:
        try:
            work()
        finally:
            with self._lock:
                if job.state == "running":        # work() settles it; a BaseException escaping it must not
                    job.error, job.state = "the render stopped", "failed"   # hold the queue for good
                self._start_next()

    def _render(self, job: RenderJob, source: Source, renderer: Renderer, plan: SessionPlan) -> None:
        def progress(_index: int) -> None:
            job.done += 1
        try:
            try:
                session = renderer.open_session(plan.width, plan.height, plan.seed)
            except BaseException:
                source.close()
                raise
            rollout = Rollout(source, plan.schedule, session)
            try:
                metrics = render_to_mp4(rollout, job.path, frames=job.frames, fps=plan.fps,
                                        renderer_name=plan.renderer, on_frame=progress)
            finally:
                rollout.close()
            job.frames = metrics.frames   # a recorded source may end early
            job.metrics = metrics.to_json()
            job.state = "done"
        except UserError as exc:
            job.error, job.state = self.shown(str(exc)), "failed"
        except Exception as exc:          # a renderer bug: this job fails, the studio keeps running
            log.exception("render job %s failed", job.id)
            job.error, job.state = self.shown(f"internal error: {type(exc).__name__}: {exc}"), "failed"

    def _forget_old(self) -> None:
        finished = [j for j in self.jobs.values() if not j.unfinished]   # in start order (dict order)
        for job in finished[:max(0, len(finished) - KEEP_FINISHED + 1)]:
            job.path.unlink(missing_ok=True)
            del self.jobs[job.id]
