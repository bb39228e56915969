"""Rendering just in time (webrtc/track.py `FrameBuffer.wait_to_render`, studio/server/worker.py): a chunk starts
its measured lead before the slot its first frame will have, once the track has said when it takes its next frame,
and a command that comes while the worker waits reaches the frame rendered right after the wait."""

from __future__ import annotations

import asyncio
import time

import av
import numpy as np

from helpers.torch_threads import one_torch_thread, random_frames  # noqa: F401
from gbuffer.formats.gbufzip import GbufZipSource, GbufZipWriter
from renderer import create_renderer
from timeline.rollout import Rollout
from timeline.schedule.live import LiveTimeline
from timeline.schedule.model import Schedule
from studio.server.outbox import Outbox
from studio.server.take_control import TakeControl
from studio.server.worker import SessionWorker
from webrtc.track import FrameBuffer, OutgoingFrame


def _frame(i: int) -> OutgoingFrame:
    return OutgoingFrame(i, av.VideoFrame.from_ndarray(np.zeros((16, 16, 3), np.uint8), format="rgb24"), 0.0)


def test_a_frame_starts_its_lead_before_the_slot_the_track_will_take_it_in():
    """30 fps, a frame ready 20 ms after it starts: with the track's next take 100 ms away a frame started now
    would wait ~80 ms, so it is not due; 10 ms away it is. Unknown or past, the old rule: due when nothing waits."""
    async def run():
        buffer = FrameBuffer(1, asyncio.get_running_loop(), send_period=1 / 30)
        buffer.note_production(1, 0.02)
        seen = [buffer.wait_to_render(timeout=0)]                  # the track never said: now
        buffer.take_next_at(time.perf_counter() + 0.1)
        seen.append(buffer.wait_to_render(timeout=0))
        buffer.take_next_at(time.perf_counter() + 0.01)
        seen.append(buffer.wait_to_render(timeout=0))
        buffer.take_next_at(time.perf_counter() + 0.1)
        began = time.perf_counter()
        seen.append(buffer.wait_to_render(timeout=1.0))            # wakes by itself once due
        waited = time.perf_counter() - began
        return seen, waited, buffer.start_margin
    seen, waited, margin = asyncio.run(run())
    assert seen == [True, False, True, True]
    assert waited >= 0.1 - 0.02 - margin - 0.001 and margin < 0.01


def test_a_wandering_lead_widens_the_margin_a_frame_starts_by():
    async def run():
        buffer = FrameBuffer(1, asyncio.get_running_loop(), send_period=1 / 30)
        buffer.note_production(1, 0.02)
        steady = buffer.start_margin
        for seconds in (0.01, 0.03, 0.01, 0.03):
            buffer.note_production(1, seconds)
        return steady, buffer.start_margin
    steady, wandering = asyncio.run(run())
    assert steady == 0.002 and wandering > 0.02


def test_a_frame_waiting_to_be_sent_puts_the_next_start_a_period_later():
    async def run():
        buffer = FrameBuffer(2, asyncio.get_running_loop(), send_period=1 / 30)
        buffer.note_production(1, 0.02)
        buffer.take_next_at(time.perf_counter() + 0.005)
        alone = buffer.wait_to_render(timeout=0)                   # due: its slot is 5 ms away, its lead 20 ms
        assert buffer.put(_frame(0), timeout=0)
        return alone, buffer.wait_to_render(timeout=0)            # behind it: its slot is 38 ms away
    assert asyncio.run(run()) == (True, False)


def test_a_switch_that_comes_while_the_worker_waits_to_render_reaches_the_very_next_frame(tmp_path):
    """The switch is sent from inside the wait (deterministically, where a click lands ~40 % of the time at
    416x224); the frame rendered when the wait ends is the first in the new style."""
    path = tmp_path / "take.gbuf.zip"
    with GbufZipWriter(path, fps=30.0) as writer:
        for frame in random_frames(12, width=64, height=32, seed=3):
            writer.write(frame)
    polar = Schedule.single("polar").conditioning_at(0)
    session = create_renderer("reference", backend="torch").open_session(64, 32, seed=0)

    class SwitchDuringTheWait(FrameBuffer):
        asked_at: int | None = None

        def wait_to_render(self, timeout: float) -> bool:
            if self.asked_at is None and worker.rollout.frame_index == 4:
                self.asked_at = worker.rollout.frame_index      # the frame the switch is asked before
                worker.submit(lambda: worker.timeline.switch(worker.rollout.frame_index, polar, 0))
            return super().wait_to_render(timeout)

    async def run():
        nonlocal worker
        loop = asyncio.get_running_loop()
        outbox = Outbox(loop)
        buffer = SwitchDuringTheWait(1, loop, send_period=1 / 30)
        rollout = Rollout(GbufZipSource(path), LiveTimeline(Schedule.single("cyberpunk")), session)
        worker = SessionWorker("session-jit", rollout, rollout.schedule, buffer, outbox, TakeControl(None, outbox),
                               stamp=False, loop_playback=False, observer=None, on_ended=lambda: None)
        worker.start()
        labels = {}
        while len(labels) < 8:
            item = await asyncio.wait_for(buffer.get(), 60)
            buffer.sent()
            labels[item.index] = item.info["label"]
        worker.stop()
        return labels, buffer.asked_at, await loop.run_in_executor(None, worker.join, 30)

    worker: SessionWorker
    labels, asked_at, stopped = asyncio.run(run())
    session.close()
    assert stopped and asked_at == 4
    assert [labels[i] for i in range(8)] == ["cyberpunk"] * 4 + ["polar"] * 4
