"""A victim beside an attack (issue 42): what every hostile-request test asserts afterwards.

    with Bystander(server) as victim:           # a real aiortc viewer streaming, /api/health asked every 100 ms
        ... send the hostile request(s) over real sockets ...
        victim.assert_unharmed()                # it kept streaming; health never took 0.5 s; the loop never stalled

Three witnesses, each on its own thread so none of them is slowed by what it watches:
- `viewer`: a real aiortc peer of the studio (a session of its own), counting decoded frames;
- the health prober: `GET /api/health` over a real socket, the slowest answer kept;
- `LoopLag` on the server's own event loop (an in-process `BackgroundServer`): the longest a 20 ms timer was late,
  which is the longest the loop was stalled by anything.
"""

from __future__ import annotations

import asyncio
import threading
import time

import httpx

from helpers.loop import LoopThread
from helpers.watch import start_owner

HEALTH_BOUND_S = 0.5     # the bound on /api/health and on any stall of the studio's loop
PROBE_EVERY_S = 0.1


class LoopLag:
    """How late a periodic timer on `loop` ran: the longest stall of that loop while it was watched."""

    def __init__(self, loop: asyncio.AbstractEventLoop, period_s: float = 0.02):
        self.loop, self.period = loop, period_s
        self.worst_s = 0.0
        self._future = None

    async def _watch(self) -> None:
        while True:
            before = time.perf_counter()
            await asyncio.sleep(self.period)
            self.worst_s = max(self.worst_s, time.perf_counter() - before - self.period)

    def __enter__(self) -> "LoopLag":
        self._future = asyncio.run_coroutine_threadsafe(self._watch(), self.loop)
        return self

    def __exit__(self, *exc) -> None:
        self._future.cancel()

    def reset(self) -> None:
        self.worst_s = 0.0


class HealthProbe:
    """`GET /api/health` every 100 ms on a thread of its own; `worst_s` is the slowest answer (a failed or timed-out
    request counts as its full wait)."""

    def __init__(self, url: str):
        self.url = url.rstrip("/") + "/api/health"
        self.worst_s = 0.0
        self.answers = 0
        self.first_answer = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="health-probe", daemon=True)

    def _run(self) -> None:
        with httpx.Client(timeout=10) as http:
            while not self._stop.is_set():
                started = time.perf_counter()
                try:
                    ok = http.get(self.url).status_code == 200
                except httpx.HTTPError:
                    ok = False
                took = time.perf_counter() - started
                self.worst_s = max(self.worst_s, took if ok else max(took, 10.0))
                self.answers += ok
                if ok:
                    self.first_answer.set()
                self._stop.wait(PROBE_EVERY_S)

    def __enter__(self) -> "HealthProbe":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(15)


class Bystander:
    """A visitor streaming from `server` (a started BackgroundServer) while something hostile happens beside it."""

    def __init__(self, server, **session_options):
        self.server = server
        self.options = {"size": "64x32", **session_options}
        self._loop = LoopThread()
        self.viewer = None
        self.health = HealthProbe(server.url)
        self.lag = LoopLag(server.app.state.loop)
        self._frames_at_start = 0

    def __enter__(self) -> "Bystander":
        self.viewer = self._loop.run(start_owner(self.server.url, **self.options))
        self._frames_at_start = len(self.viewer.frames)
        self.health.__enter__()
        self.lag.__enter__()
        # A short attack must not end before the prober's first answer, or "never answered" would be a race.
        assert self.health.first_answer.wait(30), "/api/health never answered before the attack"
        return self

    def __exit__(self, *exc) -> None:
        self.lag.__exit__()
        self.health.__exit__()
        try:
            if self.viewer is not None:
                self._loop.run(self.viewer.close(), timeout=30)
        finally:
            self._loop.close()

    @property
    def session(self):
        return self.server.sessions.get(self.viewer.session_id)

    def assert_unharmed(self, more_frames: int = 10, timeout: float = 60) -> None:
        """The victim's session is alive and decodes `more_frames` frames beyond those it had when the attack
        began; /api/health answered every probe within 0.5 s; the studio's loop never stalled 0.5 s."""
        session = self.session
        assert session is not None and session.state != "closed", "the bystander's session ended"
        want = self._frames_at_start + more_frames
        self._loop.run(self.viewer.wait_frames(want, timeout=timeout), timeout=timeout + 10)
        assert self.health.answers > 0, "/api/health never answered"
        assert self.health.worst_s < HEALTH_BOUND_S, f"/api/health took {self.health.worst_s:.2f} s"
        assert self.lag.worst_s < HEALTH_BOUND_S, f"the studio's event loop stalled {self.lag.worst_s:.2f} s"
