"""Run the studio in a background thread of this process (tests, benchmarks, notebooks).

    with BackgroundServer(Settings(max_sessions=2)) as server:
        print(server.url)
"""

from __future__ import annotations

import socket
import threading
import time

import uvicorn

from studio.server.feed_routes import websocket_options
from studio.server.app import create_app
from studio.server.goodbye import StudioServer
from studio.server.settings import Settings


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


class BackgroundServer:
    def __init__(self, settings: Settings | None = None):
        self.settings = settings or Settings()
        if not self.settings.port:
            self.settings.port = free_port(self.settings.host)
        self.app = create_app(self.settings)
        self.server = StudioServer(uvicorn.Config(self.app, host=self.settings.host, port=self.settings.port,
                                                  log_level="warning", **websocket_options(self.settings)),
                                   self.app.state.goodbyes)
        self._thread = threading.Thread(target=self.server.run, name="studio-server", daemon=True)

    @property
    def url(self) -> str:
        return f"http://{self.settings.host}:{self.settings.port}"

    @property
    def ws_url(self) -> str:
        return f"ws://{self.settings.host}:{self.settings.port}"

    @property
    def sessions(self):
        return self.app.state.sessions.sessions

    def start(self, timeout: float = 20.0) -> "BackgroundServer":
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not self.server.started:
            if not self._thread.is_alive():
                raise RuntimeError(f"the studio on {self.url} stopped while starting (the log above says why)")
            if time.monotonic() > deadline:
                raise RuntimeError(f"the studio on {self.url} did not start within {timeout:g} s: its start-up "
                                   f"({'Ray and the render workers, ' if self.settings.cluster else ''}"
                                   "the lifespan) has not finished")
            time.sleep(0.02)
        return self

    def stop(self) -> None:
        self.server.should_exit = True
        self._thread.join(15)

    def __enter__(self) -> "BackgroundServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
