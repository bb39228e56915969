"""Issue 42, the offer door: what a stranger's offer costs the studio. A victim streams beside each attack
(helpers.bystander) and must keep streaming, with /api/health and the studio's loop never held 0.5 s."""

from __future__ import annotations

import json
import random
import socket
import threading
from concurrent.futures import ThreadPoolExecutor

import httpx
import psutil
from helpers.bystander import Bystander
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

from studio.server.background import BackgroundServer
from studio.server.settings import Settings

# finding 1: 434 bytes that asked the Parseq path to expand 8 prompts over 1,080,000 frames on the event loop
FREEZE = {"sdp": "x", "schedule": {"prompts": [{"positive": f"world {i}", "allFrames": True} for i in range(8)],
                                   "keyframes": [{"frame": 1079999}]}}


def test_a_huge_parseq_schedule_gets_one_line_and_freezes_nobody():
    with BackgroundServer(Settings(port=0, max_sessions=4)) as server, Bystander(server) as victim:
        with httpx.Client(base_url=server.url, timeout=60) as http:
            answer = http.post("/api/webrtc/offer", json=FREEZE)
            assert answer.status_code == 400
            detail = answer.json()["error"]
            assert "\n" not in detail and "video" in detail            # the SDP is judged before the schedule
            answer = http.post("/api/webrtc/offer", json={**FREEZE, "sdp": "v=0\r\nm=video 9 UDP/TLS/RTP/SAVPF 96\r\n"})
            assert answer.status_code == 400
            detail = answer.json()["error"]
            assert "\n" not in detail and "frames" in detail, detail
        victim.assert_unharmed()



# ---- finding 8: bodies judged by their size before they are read --------------------------------------------

BIG = 50 << 20


def chunked_body(prefix: bytes, size: int = BIG):
    """`size` bytes sent chunked (no Content-Length), from one 1 MiB buffer: the client holds no 50 MB."""
    yield prefix
    chunk = b"x" * (1 << 20)
    for _ in range(size // len(chunk)):
        yield chunk


class PeakRss:
    """The serving process's (this one's: an in-process BackgroundServer) resident memory, sampled every 10 ms."""

    def __init__(self):
        self.process = psutil.Process()
        self.before = self.peak = self.process.memory_info().rss
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        while not self._stop.wait(0.01):
            self.peak = max(self.peak, self.process.memory_info().rss)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()

    @property
    def growth_mb(self) -> float:
        return (self.peak - self.before) / 2**20


def post_big(url: str, path: str, prefix: bytes, content_type: str) -> int | None:
    """The status of a 50 MB chunked POST, or None when the studio hung up before the client finished sending."""
    try:
        return httpx.post(url + path, content=chunked_body(prefix), headers={"content-type": content_type},
                          timeout=120).status_code
    except httpx.HTTPError:
        return None


def test_big_offer_and_whep_bodies_are_refused_before_they_are_read():
    with BackgroundServer(Settings(port=0, max_sessions=4)) as server, Bystander(server) as victim:
        # a Content-Length over the limit: refused before a byte of the body is read
        with socket.create_connection((server.settings.host, server.settings.port)) as sock:
            sock.sendall(b"POST /api/webrtc/offer HTTP/1.1\r\nHost: studio\r\nContent-Type: application/json\r\n"
                         b"Content-Length: %d\r\n\r\n{" % BIG)
            head = sock.makefile("rb").readline()
            assert b" 413 " in head, head
        jobs = [(server.url, "/api/webrtc/offer", b'{"sdp": "', "application/json")] * 8
        jobs.append((server.url, f"/whep/{victim.viewer.session_id}", b"v=0\r\n", "application/sdp"))
        with PeakRss() as rss, ThreadPoolExecutor(len(jobs)) as pool:
            statuses = list(pool.map(lambda job: post_big(*job), jobs))
        print(f"\n8 x 50 MB offers + 1 x 50 MB WHEP: statuses {statuses}; RSS +{rss.growth_mb:.0f} MB")
        assert all(status in (413, None) for status in statuses[:8]), statuses
        assert 413 in statuses[:8]
        assert statuses[8] in (401, 413, None), statuses        # no credentials: refused either way, unread
        assert rss.growth_mb < 64, f"RSS grew {rss.growth_mb:.0f} MB"
        victim.assert_unharmed()


# ---- the fuzz: schedules and feed hellos of random shapes and sizes, the loop's longest stall measured ----------

SDP = "v=0\r\nm=video 9 UDP/TLS/RTP/SAVPF 96\r\n"     # asks for video, so the schedule is parsed; no ICE, so no peer
TOKEN = "fuzz-feed-token"


def random_prompt(rng: random.Random) -> str:
    words = [rng.choice(["lava", "snow", "neon", "AND", ":", "(", ")", "0.5", "cyberpunk", "x" * rng.randint(1, 900)])
             for _ in range(rng.randint(1, 12))]
    return " ".join(words)


def random_schedule(rng: random.Random):
    shape = rng.choice(["parseq", "parseq", "keyframes", "segments", "junk"])
    if shape == "parseq":
        last = rng.choice([rng.randint(0, 200), rng.randint(0, 120_000), rng.randint(0, 2_000_000)])
        prompts = [{"positive": random_prompt(rng), "allFrames": rng.random() < 0.5,
                    "from": rng.randint(0, last), "to": rng.randint(0, last + 10),
                    "overlap": {"type": rng.choice(["none", "linear"]), "inFrames": rng.randint(0, 50),
                                "outFrames": rng.randint(0, 50)}} for _ in range(rng.randint(1, 40))]
        return {"prompts": prompts, "keyframes": [{"frame": last}], "options": {"output_fps": 30}}
    if shape == "keyframes":
        return ", ".join(f"{rng.randint(0, 1_100_000)}: {random_prompt(rng)}" for _ in range(rng.randint(1, 300)))
    if shape == "segments":
        return {"fps": 30, "length": rng.randint(1, 1_080_000),
                "segments": [{"start": rng.randint(0, 1_080_000), "prompts": [{"text": random_prompt(rng)}]}
                             for _ in range(rng.randint(1, 200))]}
    return rng.choice([[1, 2], "", "x" * rng.randint(0, 50_000), {"prompts": "?"}, 7])


def hello(name: str, schedule) -> str:
    return json.dumps({"type": "hello", "protocol": 2, "name": name, "width": 64, "height": 32, "fps": 30,
                       "output": {"schedule": schedule}})


def test_fuzzed_schedules_and_feed_hellos_never_stall_the_loop():
    rng = random.Random(42)
    settings = Settings(port=0, max_sessions=3, token=TOKEN, width=64, height=32, warm_text_matching=False)
    with BackgroundServer(settings) as server, Bystander(server) as victim:
        statuses = set()
        with httpx.Client(base_url=server.url, timeout=60) as http:
            for _ in range(40):
                answer = http.post("/api/webrtc/offer", json={"sdp": SDP, "schedule": random_schedule(rng)})
                assert answer.status_code in (400, 422, 503), answer.text
                if answer.status_code == 400:
                    assert "\n" not in answer.json()["error"]
                statuses.add(answer.status_code)
        for i in range(12):
            with connect(f"{server.ws_url}/api/engine/feed",
                         additional_headers={"Authorization": f"Bearer {TOKEN}"}) as ws:
                ws.send(hello(f"fuzz{i}", random_schedule(rng)))
                try:
                    while json.loads(ws.recv(timeout=60)).get("type") != "welcome":
                        pass
                except ConnectionClosed:
                    pass
        print(f"\nfuzz: offers answered {sorted(statuses)}; the loop's longest stall {victim.lag.worst_s:.3f} s")
        victim.assert_unharmed()
