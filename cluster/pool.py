"""The worker pool: start or join Ray, keep `workers` render workers, place sessions, notice deaths.

Placement is least-loaded with room; when every live worker is full, `place` raises PoolFull (the studio
answers 503 with Retry-After). A watch thread pings every worker: a worker whose actor or process died is
marked dead with its cause (its sessions hear it, see `on_lost`), and a replacement is asked for; a replacement
Ray cannot place yet (no free GPU or CPU slot) stays `starting` until a node with room joins, then takes
sessions. Ray itself schedules the actors; this is bookkeeping, not a scheduler.
"""

from __future__ import annotations

import itertools
import logging
import os
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from alaya_errors import UserError
from renderer.base import RendererFull

log = logging.getLogger("alaya.cluster")
PING_S = 1.0                     # how often a worker is pinged
PING_TIMEOUT_S = 30.0            # a ready worker that answers no ping for this long is dead
MAX_FAILED_STARTS = 3            # workers that die before they are ready, in a row: stop asking for more


class PoolFull(RendererFull):
    """Every live worker hosts as many sessions as it may."""


class ClusterError(UserError):
    """Ray cannot be reached, or no render worker could start."""


@dataclass
class PoolSettings:
    address: str = "local"       # local: start Ray here; auto: join a running cluster, else start one; ray://...
    workers: int = 2
    capacity: int = 2            # sessions per worker
    renderer: str = "reference"
    renderer_options: dict = field(default_factory=dict)
    batch_wait_ms: float | None = None
    max_batch: int = 4
    local_cpus: int | None = None          # CPUs a local Ray may use (default: all)


@dataclass
class WorkerHandle:
    name: str
    actor: Any
    capacity: int
    resources: dict
    sessions: dict = field(default_factory=dict)     # remote session id → its RemoteSession
    state: str = "starting"                          # starting → ready → dead
    info: dict = field(default_factory=dict)         # its last ping: node, pid, renderer
    cause: str | None = None                         # why it died
    ping: Any = None                                 # the ping in flight (an ObjectRef)
    ping_sent: float = 0.0
    last_answer: float = 0.0

    def describe(self) -> dict:
        return {"name": self.name, "state": self.state, "sessions": len(self.sessions), "capacity": self.capacity,
                "node": self.info.get("node"), "pid": self.info.get("pid"), "resources": self.resources,
                "cause": self.cause}


class WorkerPool:
    def __init__(self, settings: PoolSettings):
        self.settings = settings
        self.workers: list[WorkerHandle] = []
        self.on_lost: Callable[[WorkerHandle, str], None] | None = None   # set by the studio
        self._lock = threading.Lock()
        self._names = itertools.count(1)
        self._stop = threading.Event()
        self._watch: threading.Thread | None = None
        self._started_ray = False
        self._failed_starts = 0          # consecutive workers that died while starting (a broken model, say)

    # ---- life ------------------------------------------------------------------------------------------

    def start(self, ready_timeout: float = 180.0) -> "WorkerPool":
        """Connect to (or start) Ray, ask for the workers, wait until at least one is ready."""
        self._connect()
        for _ in range(self.settings.workers):
            self._spawn()
        self._watch = threading.Thread(target=self._watch_workers, name="cluster-watch", daemon=True)
        self._watch.start()
        deadline = time.monotonic() + ready_timeout
        while not any(w.state == "ready" for w in self.workers):
            gave_up = self._failed_starts >= MAX_FAILED_STARTS
            if gave_up or time.monotonic() > deadline:
                causes = "; ".join(f"{w.name}: {w.cause or w.state}" for w in self.workers[-3:])
                self.close()
                raise ClusterError(f"no render worker could start ({causes})" if gave_up else
                                   f"no render worker became ready within {ready_timeout:g} s ({causes})",
                                   "--cluster")
            time.sleep(0.05)
        return self

    def close(self) -> None:
        import ray

        self._stop.set()
        if self._watch is not None:
            self._watch.join(10)
        for worker in self.workers:
            try:
                ray.kill(worker.actor)
            except Exception:  # noqa: BLE001 - already gone
                pass
        if self._started_ray:
            ray.shutdown()

    def _connect(self) -> None:
        import ray

        if ray.is_initialized():
            return
        address = self.settings.address
        if address == "auto":
            try:
                ray.init(address="auto", include_dashboard=False, log_to_driver=False)
                return
            except ConnectionError:
                log.info("no running Ray cluster found: starting a local one")
                address = "local"
        try:
            if address == "local":
                ray.init(num_cpus=self.settings.local_cpus or os.cpu_count(), include_dashboard=False,
                         log_to_driver=False)
                self._started_ray = True
            else:
                ray.init(address=address, log_to_driver=False)
        except Exception as exc:  # noqa: BLE001 - Ray's errors vary by address kind; the user needs one line
            first = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else type(exc).__name__
            raise ClusterError(f"cannot reach Ray at {address}: {first}", "--cluster") from None

    def _spawn(self) -> WorkerHandle:
        import ray

        from cluster.worker import RenderWorker

        gpus = ray.cluster_resources().get("GPU", 0)
        # one GPU a worker where the cluster has GPUs, else one CPU slot (torch uses that one thread)
        resources = {"num_gpus": 1} if gpus >= 1 else {"num_cpus": 1}
        name = f"worker-{next(self._names)}"
        s = self.settings
        actor: Any = ray.remote(RenderWorker).options(max_concurrency=s.capacity + 2, **resources).remote(
            name, s.renderer, s.renderer_options, threads=1, batch_wait_ms=s.batch_wait_ms, max_batch=s.max_batch)
        handle = WorkerHandle(name, actor, s.capacity, resources)
        handle.ping, handle.ping_sent = actor.ping.remote(), time.monotonic()
        with self._lock:
            self.workers.append(handle)
        return handle

    # ---- sessions ----------------------------------------------------------------------------------------

    def place(self, session_id: str, session: Any) -> WorkerHandle:
        """The least-loaded ready worker with room takes the session; PoolFull when there is none."""
        with self._lock:
            room = [w for w in self.workers if w.state == "ready" and len(w.sessions) < w.capacity]
            if not room:
                ready = sum(w.state == "ready" for w in self.workers)
                raise PoolFull(f"studio full: all {ready} render worker(s) host as many sessions as they may; "
                               "try again when someone leaves")
            worker = min(room, key=lambda w: len(w.sessions))
            worker.sessions[session_id] = session
            return worker

    def release(self, worker: WorkerHandle, session_id: str) -> None:
        with self._lock:
            worker.sessions.pop(session_id, None)

    def died(self, worker: WorkerHandle, cause: str) -> None:
        """Mark `worker` dead (from a failed call or a failed ping); its sessions hear why, once."""
        with self._lock:
            if worker.state == "dead":
                return
            worker.state, worker.cause = "dead", cause
            lost, worker.sessions = list(worker.sessions.values()), {}
        log.warning("render worker %s died: %s (%d session(s) lost)", worker.name, cause, len(lost))
        for session in lost:
            session.lost(cause)

    def describe(self) -> list[dict]:
        with self._lock:
            return [w.describe() for w in self.workers]

    # ---- the watch thread ------------------------------------------------------------------------------------

    def _watch_workers(self) -> None:
        import ray

        while not self._stop.wait(0.1):
            now = time.monotonic()
            for worker in [w for w in list(self.workers) if w.state != "dead"]:
                done, _ = ray.wait([worker.ping], timeout=0)
                if done:
                    try:
                        worker.info = ray.get(worker.ping)
                        worker.last_answer = now
                        if worker.state == "starting":
                            worker.state = "ready"
                            log.info("render worker %s ready on %s", worker.name, worker.info.get("node"))
                    except Exception as exc:  # noqa: BLE001 - the actor or its process is gone, or init failed
                        if worker.state == "starting":
                            self._failed_starts += 1
                        self.died(worker, short_cause(exc))
                        continue
                    self._failed_starts = 0
                    if now - worker.ping_sent >= PING_S:
                        worker.ping, worker.ping_sent = worker.actor.ping.remote(), now
                elif worker.state == "ready" and now - worker.last_answer > PING_TIMEOUT_S:
                    self.died(worker, f"no answer for {PING_TIMEOUT_S:g} s")
            if self._failed_starts >= MAX_FAILED_STARTS:
                continue          # workers die as they start: more of them would too (the causes are in health)
            alive = sum(w.state != "dead" for w in self.workers)
            for _ in range(self.settings.workers - alive):   # keep the pool at its size: a replacement waits
                self._spawn()                                 # for room in the cluster as long as it must


def short_cause(exc: BaseException) -> str:
    """A Ray error as one short line: the actor was killed, its process died, its start-up failed."""
    from ray.exceptions import ActorDiedError, RayActorError, RayTaskError

    if isinstance(exc, RayTaskError):
        cause = getattr(exc, "cause", None) or exc
        return f"{type(cause).__name__}: {str(cause).strip().splitlines()[0][:200]}" if str(cause).strip() \
            else type(cause).__name__
    text = str(exc)
    if isinstance(exc, ActorDiedError) and "creation task" in text:
        # the worker's __init__ raised (a missing weights directory, say): its error is the message's last line
        last = [line for line in text.strip().splitlines() if line.strip()][-1].strip()
        kind, _, detail = last.partition(": ")
        return f"its start-up failed: {kind.rsplit('.', 1)[-1]}: {detail}"[:300]
    if isinstance(exc, ActorDiedError) and "ray.kill" in text:
        return "its actor was killed"
    if isinstance(exc, RayActorError):
        return "its actor process died" if "died" in text or "exit" in text.lower() else \
            text.strip().splitlines()[0][:200]
    return f"{type(exc).__name__}: {text.strip().splitlines()[0][:200] if text.strip() else ''}"
