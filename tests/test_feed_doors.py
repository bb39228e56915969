"""The engine feed against a stranger (issue 42, finding 5): a web page from another origin cannot open it (a
browser tab on the studio's machine is on loopback, and the default loopback studio has no feed token), feeds are
counted and capped like sessions, a hello over 1 MiB is refused unread, and frames count against the rate cap as
they arrive, not as they are decoded. Real sockets, with a visitor streaming beside each attack."""

from __future__ import annotations

import numpy as np
import pytest
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.sync.client import connect

from gbuffer.feed import Hello, encode_frame
from gbuffer.frame import GBufferFrame
from helpers.bystander import Bystander
from studio.server import Settings
from studio.server.background import BackgroundServer
from studio.server.origins import origin_allowed


@pytest.fixture(scope="module")
def studio():
    with BackgroundServer(Settings(port=0, max_sessions=2, max_feeds=2,
                                   allowed_origins=("https://show.example.com",))) as server:
        yield server


def feed_url(studio) -> str:
    return f"{studio.ws_url}/api/engine/feed"


def outcome(ws) -> tuple[int, str]:
    """The close the studio sent, waiting for it."""
    with pytest.raises(ConnectionClosed) as closed:
        for _ in range(100):
            ws.recv(timeout=20)
    assert closed.value.rcvd is not None, "dropped without a close frame"
    return closed.value.rcvd.code, closed.value.rcvd.reason


def test_a_page_from_another_origin_cannot_open_the_feed(studio):
    with Bystander(studio) as victim:
        with pytest.raises(InvalidStatus) as refused:
            connect(feed_url(studio), origin="http://evil.example")
        assert refused.value.response.status_code == 403
        port = studio.settings.port
        for welcome in (None, f"http://127.0.0.1:{port}", f"http://localhost:{port}", "https://show.example.com"):
            with connect(feed_url(studio), origin=welcome) as ws:
                ws.send(Hello(f"ok{abs(hash(welcome)) % 1000}", 32, 16, 30.0).to_json())
                assert '"welcome"' in ws.recv(timeout=20), welcome
        victim.assert_unharmed()


def test_origins_are_judged_by_name_so_dns_rebinding_does_not_pass():
    settings = Settings(port=8000, host="127.0.0.1", allowed_origins=("https://show.example.com",))
    # a rebound name resolves to 127.0.0.1, and its page's Origin and Host agree: still not the studio's
    assert not origin_allowed("http://evil.example:8000", "evil.example:8000", settings)
    assert not origin_allowed("http://localhost:9999", "localhost:8000", settings)      # another local app
    assert not origin_allowed("file://", "127.0.0.1:8000", settings)
    assert not origin_allowed("null", "127.0.0.1:8000", settings)
    assert not origin_allowed("http://[::1", "127.0.0.1:8000", settings)               # malformed: no page
    assert origin_allowed(None, "127.0.0.1:8000", settings)                              # an engine
    assert origin_allowed("http://127.0.0.1:8000", "127.0.0.1:8000", settings)
    assert origin_allowed("http://[::1]:8000", "[::1]:8000", settings)
    assert origin_allowed("https://show.example.com/", "studio.internal:8000", settings)


def test_feeds_are_capped_like_sessions_and_a_huge_hello_is_refused_unread(studio):
    with Bystander(studio) as victim:
        with connect(feed_url(studio)) as a, connect(feed_url(studio)) as b:
            a.send(Hello("cap-a", 32, 16, 30.0).to_json())
            a.recv(timeout=20)
            with connect(feed_url(studio)) as third:
                assert outcome(third) == (1013, "the studio takes at most 2 engine feeds at once")
            b.send("{" + " " * (2**20 + 10) + "}")
            code, reason = outcome(b)
            assert code == 1009 and "at most 1048576" in reason and "\n" not in reason
        victim.assert_unharmed()


def test_the_rate_cap_counts_frames_as_they_arrive(studio):
    """A zlib feed at 5 fps that floods frames: closed for its rate as the frames arrive, however slowly they
    decode, while a visitor streams on."""
    frame = encode_frame(GBufferFrame(0, 0.0, np.zeros((5, 96, 160, 3), np.uint8)), compression="zlib")
    with Bystander(studio) as victim, connect(feed_url(studio)) as ws:
        ws.send(Hello("flood", 160, 96, 5.0, compression="zlib").to_json())
        ws.recv(timeout=20)
        try:
            for _ in range(200):
                ws.send(frame)
        except ConnectionClosed:
            pass
        code, reason = outcome(ws)
        assert code == 4429 and "frames a second beyond a burst" in reason
        victim.assert_unharmed()
