"""The return path's core (issue 27), without a transport: an engine's feed, its own live session on the real
reference renderer, and the styled frames, control answers and session end that come back through its link."""

from __future__ import annotations

import asyncio
import contextlib
import threading

import numpy as np
import pytest
import torch

from alaya_errors import UserError
from gbuffer.feed import FeedHub, Hello
from renderer.reference.synthetic import synthetic_gbuffer
from timeline.schedule import Schedule
from studio.server.access import DiskLimits, Visitors
from studio.server.engine_link import EngineLink, OutputRequest, parse_output
from studio.server.owners import Folders
from studio.server.sessions import SessionManager, StudioFull
from studio.server.settings import Settings

W, H = 32, 16


@pytest.fixture(autouse=True)
def one_thread():
    torch.set_num_threads(1)


@contextlib.asynccontextmanager
async def studio(max_sessions: int = 2):
    """A session manager and feed hub as the app makes them (no HTTP), closed at the end."""
    settings = Settings(max_sessions=max_sessions, warm_text_matching=False)
    manager = SessionManager(settings, FeedHub())
    try:
        yield manager
    finally:
        await manager.close_all()


def connect_feed(manager: SessionManager, name: str = "game", fps: float = 30.0):
    return manager.feeds.register(Hello(name, W, H, fps), lambda message: None)


def owner(manager: SessionManager):
    visitors = Visitors(None, DiskLimits(), lambda: Folders(None, manager.settings.takes_path, None))
    return visitors.grant(visitors.admit(None), manager.settings.takes)


def push(feed, index: int) -> None:
    feed.push(synthetic_gbuffer(W, H, index / 30, index))


async def until(predicate, what: str, timeout: float = 30.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not predicate():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.01)


async def lockstep(link: EngineLink, feed, indices) -> list:
    """Send each frame once the previous one has come back styled: the engine loop, one frame in flight."""
    back = []
    for i in indices:
        push(feed, i)
        while True:
            frame = await asyncio.wait_for(link.next_frame(), 30)
            if frame.index == i:
                back.append(frame)
                break
    return back


# ---- the output request ---------------------------------------------------------------------------------

def test_an_output_request_parses_with_defaults_and_sizes_as_text_or_pairs():
    assert parse_output(None) == OutputRequest()
    request = parse_output({"size": "64x32", "format": "jpeg", "quality": 70, "prompt": "volcano"})
    assert (request.size, request.format, request.quality, request.prompt) == ((64, 32), "jpeg", 70, "volcano")
    assert parse_output({"size": [64, 32]}).size == (64, 32)


@pytest.mark.parametrize("data, match", [
    ([1, 2], "output: must be an object"),
    ({"format": "png"}, "output.format"),
    ({"size": "big"}, "output.size: size 'big' is not WIDTHxHEIGHT"),
    ({"quality": 0}, "output.quality"),
    ({"colour": "red"}, "output.colour: unknown field"),
    ({"prompt": 7}, "output.prompt"),
])
def test_a_bad_output_request_is_one_line_naming_the_field(data, match):
    with pytest.raises(UserError, match=match) as refused:
        parse_output(data)
    assert "\n" not in str(refused.value)


# ---- a link on a real session ---------------------------------------------------------------------------

def test_styled_frames_come_back_tagged_with_the_gbuffer_frame_they_came_from():
    async def scenario():
        async with studio() as manager:
            feed = connect_feed(manager)
            link = await EngineLink.open(manager, feed, OutputRequest(prompt="volcano"), owner(manager))
            session = manager.sessions[link.session_id]      # listed like a visitor's, with its owner key
            assert session.owner_key == link.owner_key and session.source_name == "feed:game"
            assert link.watch["page"] == f"/studio/watch/{link.session_id}?key={link.watch['key']}"
            assert session.audience.admits(link.watch["key"])
            back = await lockstep(link, feed, [5, 6, 7, 40])
            assert [f.index for f in back] == [5, 6, 7, 40]
            frame = back[-1]
            assert (frame.width, frame.height, frame.format, len(frame.data)) == (W, H, "rgb24", W * H * 3)
            assert frame.render_ms > 0
            # exactly what the reference renderer makes of that G-buffer with that prompt
            expected = manager.renderer("reference").open_session(W, H, 0).render(
                [synthetic_gbuffer(W, H, 40 / 30, 40)], [Schedule.single("volcano").conditioning_at(0)]).rgb[0]
            np.testing.assert_array_equal(frame.rgb(), expected)
            await link.close()
            assert link.session_id not in manager.sessions
            assert await link.next_frame() is None
    asyncio.run(scenario())


def test_jpeg_frames_at_the_size_asked_for():
    async def scenario():
        async with studio() as manager:
            feed = connect_feed(manager)
            link = await EngineLink.open(manager, feed, parse_output({"size": "64x32", "format": "jpeg",
                                                                      "quality": 95}), owner(manager))
            frame = (await lockstep(link, feed, [3]))[0]
            assert frame.format == "jpeg" and frame.data[:2] == b"\xff\xd8"
            assert frame.rgb().shape == (32, 64, 3)
            assert link.welcome()["width"] == 64
            await link.close()
    asyncio.run(scenario())


def test_control_messages_are_the_data_channels_own_and_get_its_answers():
    async def scenario():
        async with studio() as manager:
            feed = connect_feed(manager)
            link = await EngineLink.open(manager, feed, OutputRequest(prompt="cyberpunk"), owner(manager))
            await lockstep(link, feed, [0])
            pusher = Pusher(feed, start=1)          # the engine keeps streaming while it switches styles
            with pusher:
                ack = await link.control({"type": "preset", "name": "volcano"})
                assert ack["type"] == "ack" and ack["request"] == "preset" and ack["label"] == "volcano", ack
                blend = await link.control({"type": "blend", "prompts": [{"preset": "polar", "weight": 0.5},
                                                                         {"preset": "volcano", "weight": 0.5}]})
                assert blend["type"] == "ack" and blend["request"] == "blend", blend
                unknown = await link.control({"type": "preset", "name": "no-such-style"})
                assert unknown["type"] == "error" and "no-such-style" in unknown["message"], unknown
                assert (await link.control('{"type": "warp"}'))["message"].startswith("unknown message type")
                assert (await link.control("not json"))["type"] == "error"
                stats = await link.control({"type": "stats"})
                assert stats["type"] == "stats" and stats["session_id"] == link.session_id and stats["errors"] == 3
                assert await link.control({"type": "input", "steer": 0.5, "throttle": 1.0, "brake": 0.0,
                                           "reset": False}) is None
            await link.close()
    asyncio.run(scenario())


def test_an_engine_that_stops_reading_stalls_nothing_and_hears_what_it_missed():
    async def scenario():
        async with studio() as manager:
            slow_feed, other_feed = connect_feed(manager, "slow"), connect_feed(manager, "other")
            slow = await EngineLink.open(manager, slow_feed, OutputRequest(), owner(manager))
            other = await EngineLink.open(manager, other_feed, OutputRequest(), owner(manager))
            await lockstep(slow, slow_feed, [0])
            for i in range(1, 9):       # `slow` reads nothing meanwhile; its session renders every frame anyway
                push(slow_feed, i)
                await until(lambda i=i: slow.slot.produced > i, f"frame {i} of the engine that stopped reading")
            assert [f.index for f in await lockstep(other, other_feed, range(10))] == list(range(10))
            frame = await slow.next_frame()
            assert (frame.index, frame.missed) == (8, 7)
            assert [(f.index, f.missed) for f in await lockstep(slow, slow_feed, [9])] == [(9, 0)]
            await slow.close()
            await other.close()
    asyncio.run(scenario())


def test_the_link_ends_when_its_feed_goes_and_answers_none():
    async def scenario():
        async with studio() as manager:
            feed = connect_feed(manager)
            link = await EngineLink.open(manager, feed, OutputRequest(), owner(manager))
            await lockstep(link, feed, [0])
            manager.feeds.remove(feed)
            while (await asyncio.wait_for(link.next_frame(), 30)) is not None:
                pass
            ended = await asyncio.wait_for(link.next_message(), 30)
            assert ended["type"] == "ended", ended
            await until(lambda: link.session_id not in manager.sessions, "the session to leave the manager")
            await link.close()       # after the session ended on its own: nothing left to do, no error
    asyncio.run(scenario())


def test_requests_the_studio_cannot_serve_are_refused_in_one_line():
    async def scenario():
        async with studio(max_sessions=1) as manager:
            feed = connect_feed(manager)
            with pytest.raises(UserError, match="unknown renderer 'nope'"):
                await EngineLink.open(manager, feed, OutputRequest(renderer="nope"), owner(manager))
            with pytest.raises(UserError, match="size"):
                await EngineLink.open(manager, feed, OutputRequest(size=(33, 16)), owner(manager))
            with pytest.raises(UserError, match="give 'schedule' or 'prompt', not both"):
                await EngineLink.open(manager, feed, OutputRequest(prompt="volcano", schedule="0: polar"),
                                      owner(manager))
            link = await EngineLink.open(manager, feed, OutputRequest(), owner(manager))
            with pytest.raises(StudioFull):             # the visitors' session limit holds for engines too
                await EngineLink.open(manager, connect_feed(manager, "second"), OutputRequest(), owner(manager))
            assert len(manager.sessions) == 1
            await link.close()
    asyncio.run(scenario())


class Pusher:
    """Frames into a feed from a thread, as an engine loop would, until the block ends."""

    def __init__(self, feed, start: int = 0):
        self.feed, self.index = feed, start
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(1 / 30):
            push(self.feed, self.index)
            self.index += 1

    def __enter__(self) -> "Pusher":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(5)
