"""An engine feed outlives a studio restart (issue 45, finding 1): the studio's close always comes with a
reason (the studio closes each feed with 1012 and its reason before uvicorn's shutdown, and waits for the
engine's echo so the close frame is not lost to a reset: studio/server/goodbye.py), and a FeedClient asked
to reconnect tries again, 0.5 s doubling to 5 s, until a studio answers on its URL, then feeds it on."""

from __future__ import annotations

import threading

import pytest

from gbuffer.engine import EngineSource
from gbuffer.feed.client import FeedClient, stream_source
from gbuffer.feed.protocol import FeedError
from helpers.browser import wait_until
from helpers.raw_engine import RawEngine
from studio.server import Settings
from studio.server.background import BackgroundServer, free_port
from studio.server.goodbye import GOODBYE_S, RESTART_REASON


def feed_frames(server, name: str) -> int:
    return next((f.frames for f in server.app.state.feeds.feeds() if f.name == name), 0)


def test_a_feed_names_the_restart_and_comes_back_to_the_new_studio():
    port = free_port()
    first = BackgroundServer(Settings(port=port)).start()
    client = FeedClient(f"ws://127.0.0.1:{port}/api/engine/feed", name="kart", width=64, height=32, fps=30,
                        reconnect_for_s=120)
    outcome: dict = {}

    def engine() -> None:
        with EngineSource(width=64, height=32, fps=30, autopilot=True) as source:
            try:
                outcome["sent"] = stream_source(source, client)
            except FeedError as exc:
                outcome["error"] = str(exc)
    client.connect()
    thread = threading.Thread(target=engine, name="engine", daemon=True)
    thread.start()
    second = None
    try:
        wait_until(lambda: feed_frames(first, "kart") > 10, 30, "the engine does not feed the studio")
        first.stop()                                            # the studio goes away under the engine
        wait_until(lambda: client.past_closes or outcome, 30, "the engine did not see the studio close")
        assert not outcome, f"the engine gave up: {outcome}"
        assert client.past_closes[0] == (1012, RESTART_REASON)
        assert thread.is_alive()                                # still trying, not exited
        second = BackgroundServer(Settings(port=port)).start()  # the studio is back on its address
        wait_until(lambda: feed_frames(second, "kart") > 10, 30,
                   lambda: f"the engine did not come back: {outcome}, {client.close_reason}")
        assert client.reconnects == 1 and client.connected
    finally:
        client.reconnect_for_s = 0                              # the next close ends the feed
        if second is not None:
            second.stop()
        else:
            first.stop()
        thread.join(30)
    assert not thread.is_alive() and "sent" in outcome, outcome
    assert client.close_reason == RESTART_REASON


def test_a_feed_not_asked_to_reconnect_stops_and_says_why():
    with BackgroundServer(Settings(port=0)) as server:
        client = FeedClient(f"{server.ws_url}/api/engine/feed", name="once", width=64, height=32, fps=30)
        client.connect()
        wait_until(lambda: "once" in server.app.state.feeds.names(), 30, "the feed never registered")
    wait_until(lambda: not client.connected, 30, "the client did not see the studio go")
    assert client.close_reason == RESTART_REASON
    assert not client.may_reconnect() and client.reconnects == 0
    client.close()


def test_a_feed_whose_studio_stays_away_gives_up_after_its_time_with_one_line():
    server = BackgroundServer(Settings(port=0)).start()
    client = FeedClient(f"{server.ws_url}/api/engine/feed", name="patient", width=64, height=32, fps=30,
                        reconnect_for_s=1.5)
    client.connect()
    wait_until(lambda: "patient" in server.app.state.feeds.names(), 30, "the feed never registered")
    server.stop()                                           # and nothing comes back on its address
    with EngineSource(width=64, height=32, fps=30, autopilot=True) as source, \
            pytest.raises(FeedError) as gave_up:
        stream_source(source, client)
    assert str(gave_up.value).startswith("--connect: the studio did not take the feed again within 1.5 s: cannot "
                                         "connect to ws://"), gave_up.value
    assert "\n" not in str(gave_up.value) and client.past_closes[0][0] == 1012


def test_an_engine_that_never_answers_the_goodbye_hears_it_and_cannot_hold_the_shutdown():
    """A bare-socket engine that never echoes a close: the studio's 1012 and its reason reach it, the studio waits
    for its echo at most GOODBYE_S, then stops all the same."""
    server = BackgroundServer(Settings(port=0)).start()
    engine = RawEngine(server)
    try:
        wait_until(lambda: server.app.state.feeds.connected == 1, 30, "the studio did not take the socket")
        stopping = threading.Thread(target=server.stop, name="stop")
        stopping.start()
        assert engine.closed_with() == (1012, RESTART_REASON)
        stopping.join(GOODBYE_S + 20)
        assert not stopping.is_alive() and not server._thread.is_alive(), "the studio waits on a silent engine"
    finally:
        engine.close()
