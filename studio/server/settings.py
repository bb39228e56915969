"""Server settings: one dataclass, filled from `alaya-studio serve` flags or by tests."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field
from pathlib import Path

from studio.server.access import DiskLimits
from studio.takes import TakeStore
from studio.takes.recorder import DEFAULT_MIN_FREE
from webrtc.ice import IceConfig

UPLOAD_FOLDER = "uploads"            # inside the data directory: visitors' uploads (studio/ui/uploads.py)


@dataclass
class Settings:
    host: str = "127.0.0.1"
    port: int = 7860                  # 0 = pick a free port (BackgroundServer)
    max_sessions: int = 4
    renderer: str = "reference"
    renderer_options: dict = field(default_factory=dict)   # e.g. {"weights": DIR} for flash
    token: str | None = None          # engine feeds must present it; required when listening beyond loopback
    admin_token: str | None = None    # the operator's and presenter's: every session, GET /api/sessions (access.py)
    metrics_token: str | None = None  # a Prometheus scraper's: /metrics only (it names every live session)
    data_dir: Path | None = None      # recorded sequences a visitor may pick as `source` (paths inside only)
    width: int = 416
    height: int = 224
    fps: float = 30.0
    max_width: int = 1920
    max_height: int = 1080
    max_fps: float = 60.0
    connect_timeout_s: float = 10.0   # an offer whose ICE/DTLS never connects is dropped after this (issue 42: a
                                      # slot squatted by offers that never connect is held this long)
    max_pending_per_client: int = 2   # offers of one address not yet connected (issue 42: slots cost something)
    pending_limit_on_loopback: bool = False   # the studio's own machine is trusted; tests turn it on
    peer_timeout_s: float = 10.0      # a peer that stops sending RTCP receiver reports while we stream is gone
    feed_max_fps: float = 120.0       # engine feed caps
    feed_max_pixels: int = 1920 * 1080
    feed_idle_timeout_s: float = 10.0  # a feed that sends nothing this long is closed
    max_feeds: int = 4                 # engine feeds connected at once (each may hold a few frames in memory)
    allowed_origins: tuple[str, ...] = ()   # web pages beyond the studio's own that may open the feed
    grpc_port: int | None = None      # the engine feed over gRPC too, on `host` (serve --grpc-port); None = off
    ice: IceConfig = field(default_factory=IceConfig)  # STUN/TURN for the page and the server's peers
    max_watchers: int = 10            # audience peers (watch page, WHEP) per session
    warm_text_matching: bool = True   # load the free-text matcher at start, not on the first free-text prompt
    takes_dir: Path | None = None     # where takes are recorded; default: DATA_DIR/takes, else ./takes
    take_min_free: int = DEFAULT_MIN_FREE   # bytes: a take stops cleanly when its disk has less free space
    osc_port: int | None = None       # OSC control over UDP (show control surfaces); None = off
    osc_host: str = "127.0.0.1"
    osc_allow_remote: bool = False    # OSC carries no credentials: beyond loopback only when the operator says so
    osc_session: str | None = None    # the session OSC commands without /alaya/session/<id>/ go to; None = newest
    batch_wait_ms: float | None = None   # batch sessions of a renderer into shared passes, waiting at most this
    max_batch: int = 4                   # long for a late session's chunk (renderer/batching.py); None = off
    cluster: str | None = None           # render workers on Ray (cluster/): local | auto | ray://HOST:PORT
    workers: int = 2                     # with `cluster`: render workers to keep
    worker_sessions: int = 2             # with `cluster`: sessions one worker hosts at most
    cluster_cpus: int | None = None      # with `cluster local`: CPUs the local Ray may use (default: all)
    disk: DiskLimits = field(default_factory=DiskLimits)   # uploads and takes per visitor, and their byte quota

    @property
    def takes_path(self) -> Path:
        if self.takes_dir is not None:
            return Path(self.takes_dir)
        return Path(self.data_dir) / "takes" if self.data_dir is not None else Path("takes")

    @property
    def uploads_path(self) -> Path:
        if self.data_dir is None:
            raise ValueError("uploads live in the data directory, and none is set")
        return Path(self.data_dir) / UPLOAD_FOLDER

    @property
    def takes(self) -> TakeStore:
        return TakeStore(self.takes_path, self.take_min_free)

    @property
    def loopback(self) -> bool:
        return is_loopback(self.host)


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
