"""A live session in two stages (studio/server/worker.py, studio/server/chunk_stage.py): the worker begins each
flash chunk (its denoising) and a second thread finishes it (decoder, refiner, hand-over) while the next one
begins. The frames handed over are the ones a serial rollout renders, in order; the hand-over counts a chunk's
frames not put yet as waiting; a failed chunk reaches the worker's thread."""

from __future__ import annotations

import asyncio
import threading

import av
import numpy as np
import pytest

from helpers.torch_threads import one_torch_thread, random_frames  # noqa: F401
from gbuffer.formats.gbufzip import GbufZipSource, GbufZipWriter
from gbuffer.formats.pictures import yuv420p
from prompt_presets.presets import get_preset
from renderer import create_renderer
from timeline.rollout import Rollout
from timeline.schedule.live import LiveTimeline
from timeline.schedule.model import Schedule
from studio.server.chunk_stage import ChunkStage
from studio.server.outbox import Outbox
from studio.server.take_control import TakeControl
from studio.server.worker import SessionWorker
from webrtc.track import FrameBuffer, OutgoingFrame

FRAMES, W, H = 16, 64, 32


def _frame(i: int) -> OutgoingFrame:
    return OutgoingFrame(i, av.VideoFrame.from_ndarray(np.zeros((16, 16, 3), np.uint8), format="rgb24"), 0.0)


def test_frames_a_chunk_under_way_has_promised_count_as_waiting_until_they_are_put():
    async def run():
        buffer = FrameBuffer(4, asyncio.get_running_loop(), send_period=1 / 30)
        buffer.note_production(4, 0.2, 0.16)      # 50 ms a frame, the first frame 160 ms after a chunk starts
        buffer.promise(4)
        seen = [buffer.wait_to_render(timeout=0), buffer.drained]       # 4 waiting x 50 ms > 160 ms
        assert buffer.put(_frame(0), timeout=0, settles=True)
        seen.append(buffer.wait_to_render(timeout=0))                   # still 4: one in, three promised
        await buffer.get()
        buffer.sent()
        seen.append(buffer.wait_to_render(timeout=0))                   # 3 x 50 ms < 160 ms: due
        buffer.settle(3)                                                # the rest went stale (a seek)
        seen.append(buffer.drained)
        return seen
    assert asyncio.run(run()) == [False, False, False, True, True]


def test_a_renderer_whose_first_frame_takes_a_whole_chunk_begins_the_next_while_the_last_is_finished():
    """Without a stage under way a full hand-over waits (the worker itself would block on it); with one, the
    promised frames are put by the second stage, so the next chunk begins once they will have gone out by its
    first frame."""
    async def run():
        buffer = FrameBuffer(4, asyncio.get_running_loop(), send_period=1 / 30)
        buffer.note_production(4, 0.4, 0.45)      # 100 ms a frame, the first after 450 ms
        for i in range(4):
            buffer.put(_frame(i), timeout=0)
        full = buffer.wait_to_render(timeout=0)
        for _ in range(4):
            await buffer.get()
        buffer.promise(4)
        return full, buffer.wait_to_render(timeout=0)
    assert asyncio.run(run()) == (False, True)


def test_a_failed_chunk_reaches_the_workers_thread_and_the_chunks_after_it_are_not_finished():
    stage, ran = ChunkStage("test-finish"), []

    def failing() -> None:
        raise RuntimeError("the decoder broke")
    assert stage.submit(failing, lambda: False)
    assert stage.submit(lambda: ran.append(1), lambda: False)
    assert stage.close(10.0)
    with pytest.raises(RuntimeError, match="the decoder broke"):
        stage.raise_error()
    assert ran == []


def _serial_frames(renderer, frames, cond) -> list[np.ndarray]:
    with renderer.open_session(W, H, seed=0) as session:
        return [r for i in range(0, len(frames), 4)
                for part in session.render_stream(frames[i:i + 4], cond) for r in part.rgb]


def _yuv(rgb: np.ndarray) -> np.ndarray:
    return yuv420p(rgb).to_ndarray()


def test_a_live_flash_session_finishes_each_chunk_on_its_second_stage_with_the_frames_of_a_serial_rollout(tmp_path):
    renderer = create_renderer("flash", device="cpu", chunk_size=4, overlap_chunks=True)
    frames = random_frames(FRAMES, width=W, height=H, seed=3)
    preset = get_preset("polar")
    schedule = Schedule.single(preset.name)
    expected = _serial_frames(renderer, frames, [schedule.conditioning_at(i) for i in range(4)])
    path = tmp_path / "take.gbuf.zip"
    with GbufZipWriter(path, fps=30.0) as writer:
        for frame in frames:
            writer.write(frame)

    assert not create_renderer("flash", device="cpu", chunk_size=4).open_session(W, H).overlaps_chunks  # opt-in
    session = renderer.open_session(W, H, seed=0)
    assert session.overlaps_chunks
    threads = {"begun": set(), "finished": set()}
    begin = session.begin_chunk

    def begin_chunk(chunk, conditioning):      # where each half of a chunk runs
        threads["begun"].add(threading.current_thread().name)
        parts = begin(chunk, conditioning)

        def finish():
            for part in parts:
                threads["finished"].add(threading.current_thread().name)
                yield part
        return finish()
    session.begin_chunk = begin_chunk

    async def run():
        loop = asyncio.get_running_loop()
        outbox = Outbox(loop)
        buffer = FrameBuffer(4, loop, send_period=1 / 30)
        rollout = Rollout(GbufZipSource(path), LiveTimeline(schedule), session)
        worker = SessionWorker("session-test", rollout, rollout.schedule, buffer, outbox, TakeControl(None, outbox),
                               stamp=False, loop_playback=False, observer=None, on_ended=lambda: None)
        worker.start()
        got = []
        while len(got) < FRAMES:
            item = await asyncio.wait_for(buffer.get(), 120)
            buffer.sent()
            got.append((item.index, item.video.to_ndarray()))
        worker.stop()
        stopped = await loop.run_in_executor(None, worker.join, 30)
        return got, stopped, worker
    got, stopped, worker = asyncio.run(run())
    session.close()
    assert stopped and worker.stage is not None and not worker.stage._thread.is_alive()
    assert [index for index, _ in got] == list(range(FRAMES))
    for (_, yuv), rgb in zip(got, expected):
        np.testing.assert_array_equal(yuv, _yuv(rgb))
    assert threads == {"begun": {"session-test"}, "finished": {"session-test-finish"}}


def test_a_seek_while_a_chunk_is_finished_drops_its_stale_frames_and_the_stream_goes_on_from_the_new_frame(tmp_path):
    renderer = create_renderer("flash", device="cpu", chunk_size=4, overlap_chunks=True)
    path = tmp_path / "take.gbuf.zip"
    with GbufZipWriter(path, fps=30.0) as writer:
        for frame in random_frames(FRAMES, width=W, height=H, seed=5):
            writer.write(frame)
    session = renderer.open_session(W, H, seed=0)

    async def run():
        loop = asyncio.get_running_loop()
        outbox = Outbox(loop)
        buffer = FrameBuffer(4, loop, send_period=1 / 30)
        rollout = Rollout(GbufZipSource(path), LiveTimeline(Schedule.single("polar")), session)
        worker = SessionWorker("session-seek", rollout, rollout.schedule, buffer, outbox, TakeControl(None, outbox),
                               stamp=False, loop_playback=False, observer=None, on_ended=lambda: None)
        worker.start()
        before, after = [], []
        while len(before) < 6:
            before.append((await asyncio.wait_for(buffer.get(), 120)).index)
            buffer.sent()
        worker.submit(lambda: worker.seek(12))
        while len(after) < 4 or after[-4:] != [12, 13, 14, 15]:
            after.append((await asyncio.wait_for(buffer.get(), 120)).index)
            buffer.sent()
        worker.stop()
        stopped = await loop.run_in_executor(None, worker.join, 30)
        return before, after, stopped, buffer
    before, after, stopped, buffer = asyncio.run(run())
    session.close()
    assert stopped and before == list(range(6))
    # what came between the seek and frame 12: frames of the chunks under way then, in order, none after 11
    stale = after[:-4]
    assert stale == sorted(stale) and all(6 <= i < 12 for i in stale)
    assert buffer.drained          # nothing promised is left over after the stale chunk


def test_a_bad_overlap_chunks_setting_is_one_line_naming_it():
    from renderer.base import RendererError

    with pytest.raises(RendererError, match=r"^overlap_chunks: .*bool") as caught:
        create_renderer("flash", device="cpu", overlap_chunks="sometimes")
    assert "\n" not in str(caught.value)
