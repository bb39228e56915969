"""/metrics through prometheus_client: one registry per app (tests run several apps in one process), live
gauges and counters read from the session manager at scrape time, and histograms the sessions feed as they run."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
# Seconds; chunk renders run from ~10 ms (reference, small) to seconds (flash on a CPU).
RENDER_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)
LATENCY_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.15, 0.25, 0.5, 1, 2.5, 5)
FIRST_FRAME_BUCKETS = (0.1, 0.25, 0.5, 1, 2, 5, 10, 20)


class SessionObserver:
    """What a live session reports as it runs (called from its worker and the event loop)."""

    def __init__(self, metrics: "StudioMetrics", renderer: str):
        self._render = metrics.chunk_render.labels(renderer)
        self._latency = metrics.frame_latency.labels(renderer)
        self._first = metrics.time_to_first_frame.labels(renderer)

    def chunk_rendered(self, seconds: float) -> None:
        self._render.observe(seconds)

    def frame_sent(self, latency_s: float) -> None:
        self._latency.observe(latency_s)

    def first_frame(self, seconds: float) -> None:
        self._first.observe(seconds)


class StudioMetrics:
    def __init__(self, sessions, feeds, settings):
        self.registry = CollectorRegistry(auto_describe=True)
        self.chunk_render = Histogram("alaya_chunk_render_seconds", "Time to render one chunk of a live session",
                                      ["renderer"], buckets=RENDER_BUCKETS, registry=self.registry)
        # The server's share of glass-to-glass: from the moment its chunk started rendering (the G-buffer is in
        # hand) to the moment the frame is handed to the encoder and sent. The browser adds network, jitter
        # buffer and decode on top.
        self.frame_latency = Histogram("alaya_frame_latency_seconds", "Render start to frame sent, per frame",
                                       ["renderer"], buckets=LATENCY_BUCKETS, registry=self.registry)
        self.time_to_first_frame = Histogram("alaya_time_to_first_frame_seconds",
                                             "Offer received to first video frame sent", ["renderer"],
                                             buckets=FIRST_FRAME_BUCKETS, registry=self.registry)
        self.osc_applied = Counter("alaya_osc_applied", "OSC commands applied to a session", registry=self.registry)
        self.osc_rejected = Counter("alaya_osc_rejected", "OSC packets or commands rejected", ["reason"],
                                    registry=self.registry)
        self.registry.register(_LiveState(sessions, feeds, settings))

    def observer(self, renderer: str) -> SessionObserver:
        return SessionObserver(self, renderer)

    def exposition(self) -> bytes:
        return generate_latest(self.registry)


class _LiveState(Collector):
    """Gauges and counters read at scrape time from the objects that own them (no second copy to keep in step)."""

    def __init__(self, sessions, feeds, settings):
        self.sessions, self.feeds, self.settings = sessions, feeds, settings

    def collect(self):
        mgr = self.sessions
        yield GaugeMetricFamily("alaya_sessions_active", "Live sessions", value=len(mgr.sessions))
        yield GaugeMetricFamily("alaya_sessions_max", "Session limit", value=self.settings.max_sessions)
        yield CounterMetricFamily("alaya_sessions_started", "Sessions started", value=mgr.sessions_started)
        yield CounterMetricFamily("alaya_sessions_refused", "Offers refused: studio full",
                                  value=mgr.sessions_refused)
        yield GaugeMetricFamily("alaya_feeds_connected", "Connected engine feeds", value=len(self.feeds.names()))
        fps = GaugeMetricFamily("alaya_session_fps", "Measured frames per second", labels=["session", "renderer"])
        sent = CounterMetricFamily("alaya_session_frames_sent", "Frames sent", labels=["session", "renderer"])
        latency = GaugeMetricFamily("alaya_session_latency_ms", "Last frame's render start to send, ms",
                                    labels=["session", "renderer"])
        for s in list(mgr.sessions.values()):
            labels = [s.id, s.renderer_name]
            fps.add_metric(labels, s.track.meter.fps)
            sent.add_metric(labels, s.track.frames_sent)
            latency.add_metric(labels, s.reports.last_sent.latency_ms or 0.0)
        yield from (fps, sent, latency)
        if mgr.pool is not None:
            yield from _workers(mgr.pool.describe())


def _workers(workers: list[dict]):
    """With --cluster: the render workers, by state, and each one's sessions."""
    states = GaugeMetricFamily("alaya_cluster_workers", "Render workers by state", labels=["state"])
    for state in ("starting", "ready", "dead"):
        states.add_metric([state], sum(w["state"] == state for w in workers))
    sessions = GaugeMetricFamily("alaya_worker_sessions", "Sessions on a render worker", labels=["worker", "node"])
    capacity = GaugeMetricFamily("alaya_worker_capacity", "Sessions a render worker may host", labels=["worker"])
    for w in workers:
        if w["state"] != "dead":
            sessions.add_metric([w["name"], w["node"] or ""], w["sessions"])
            capacity.add_metric([w["name"]], w["capacity"])
    yield from (states, sessions, capacity)
