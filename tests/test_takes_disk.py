"""A take on a disk that fills: recording stops with a message, the stream goes on, and what was written stays a
valid take. The disk is a real one: a small tmpfs mounted for the test (so it needs root, as CI has here)."""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
import torch

from gbuffer.formats import GbufZipWriter, open_sequence
from gbuffer.frame import GBufferFrame
from helpers.sessions import wait_no_sessions
from studio.server import Settings
from studio.server.background import BackgroundServer
from studio.takes import TakeStore, open_take
from media.video import Mp4Writer, VideoWriteError, read_mp4_frames
from webrtc.client import StudioViewer

VIEW = {"size": "64x32", "source": "demo", "prompt": "polar"}
DISK_BYTES = 6 * 2**20


@pytest.fixture
def small_disk(tmp_path):
    """A 6 MiB filesystem of its own, unmounted at the end."""
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("mounting a small tmpfs needs root")
    disk = tmp_path / "disk"
    disk.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={DISK_BYTES}", "tmpfs", str(disk)], check=True)
    try:
        yield disk
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=True)


def fill(disk: Path, name: str = "filler.bin") -> Path:
    """Another program takes every free byte of the disk."""
    filler = disk / name
    with open(filler, "wb") as f:
        try:
            while True:
                f.write(bytes(64 * 1024))
                f.flush()
        except OSError as exc:
            assert exc.errno == 28    # ENOSPC: the disk is full
    return filler


def take_on(disk: Path, min_free: int, *, filler: bool):
    """Record a take into `disk` until it stops by itself; → (the stopped message, frames the viewer received
    after it, the start error when the disk had no room)."""
    torch.set_num_threads(1)
    settings = Settings(port=0, max_sessions=1, takes_dir=disk, take_min_free=min_free, warm_text_matching=False)

    async def scenario(studio):
        async with StudioViewer(studio.url, **VIEW, keep_pixels=False) as viewer:
            await viewer.wait_frames(2)
            mark = await viewer.send({"type": "take", "action": "start"})
            await viewer.wait_message("ack", after=mark, request="take")
            if filler:   # once the take holds a second and more (one complete MP4 fragment), the disk fills
                await viewer.wait_until(lambda: any(m.get("type") == "status" and m.get("take", {}).get("frames", 0)
                                                    >= 45 for m in viewer.messages[mark:]), 60, "45 frames in the take")
                await asyncio.get_running_loop().run_in_executor(None, fill, disk)
            stopped = await viewer.wait_message("take", after=mark, state="stopped", timeout=120)
            if filler:   # the room the take gave back when it finished is taken too
                await asyncio.get_running_loop().run_in_executor(None, fill, disk, "filler-2.bin")
            n = len(viewer.frames)
            await viewer.wait_frames(n + 30)             # the stream goes on
            # with the disk still full (or below its margin) a new take is refused in one line
            mark = await viewer.send({"type": "take", "action": "start"})
            refused = await viewer.wait_message("error", after=mark)
        assert await wait_no_sessions(studio, 60)
        return stopped, refused

    with BackgroundServer(settings) as studio:
        return asyncio.run(scenario(studio))


def assert_valid_take(folder: Path, stopped: dict) -> dict:
    """Everything written so far is a take that opens and re-renders: input, schedule, output, metadata."""
    take = open_take(folder)
    n = take.meta["frames"]
    assert n == stopped["frames"] >= 45 and take.meta["stopped_because"] == stopped["reason"]
    assert len(open_sequence([str(take.input)])) == n
    assert take.schedule.length == n
    output = read_mp4_frames(folder / "output.mp4")       # decodes to its end: no broken tail
    assert 30 <= len(output) <= n
    assert not (folder / ".reserve").exists() and not list(folder.glob("*.tmp")) + list(folder.glob("*.part"))
    return take.meta


def test_a_disk_that_fills_mid_take_keeps_what_was_written(small_disk):
    stopped, refused = take_on(small_disk, 0, filler=True)
    assert stopped["reason"] == "recording stopped: the disk is full", stopped
    assert_valid_take(small_disk / stopped["take_id"], stopped)
    assert refused["message"] == "cannot start a take: No space left on device", refused


def test_a_take_stops_cleanly_before_its_disk_is_full(small_disk):
    margin = DISK_BYTES - 2 * 2**20        # stop with 4 MiB left: after about 1 MiB of take beside its reserve
    stopped, refused = take_on(small_disk, margin, filler=False)
    assert stopped["reason"].startswith("recording stopped: the disk is almost full ("), stopped
    meta = assert_valid_take(small_disk / stopped["take_id"], stopped)
    assert len(read_mp4_frames(small_disk / stopped["take_id"] / "output.mp4")) == meta["frames"]   # closed, not cut
    assert shutil.disk_usage(small_disk).free >= margin - 2**20
    assert refused["message"].startswith("cannot start a take: the disk is almost full ("), refused
    # the refused take left no folder behind
    assert [p.name for p in small_disk.iterdir()] == [stopped["take_id"]]
    assert json.loads((small_disk / stopped["take_id"] / "take.json").read_text())["frames"] == meta["frames"]
    assert [t.id for t in TakeStore(small_disk).finished()] == [stopped["take_id"]]


def noise_frames(width: int = 64, height: int = 32):
    """Frames that do not compress, so the disk fills in a few hundred of them."""
    rng = np.random.default_rng(3)
    for i in itertools.count():
        yield GBufferFrame(i, i / 30, rng.integers(0, 256, (5, height, width, 3), dtype=np.uint8))


def test_an_archive_that_meets_a_full_disk_closes_with_its_complete_frames(small_disk):
    reserve = small_disk / "reserve"
    reserve.write_bytes(bytes(2**20))
    writer = GbufZipWriter(small_disk / "in.gbuf.zip", fps=30)
    with pytest.raises(OSError) as failed:
        for frame in noise_frames():
            writer.write(frame)
    assert failed.value.errno == 28 and writer.frames_written > 10
    reserve.unlink()                   # what a take does: give back its reserve, then close
    writer.close()
    recording = open_sequence([str(small_disk / "in.gbuf.zip")])
    assert len(recording) == writer.frames_written          # the half-written frame was taken back
    assert np.array_equal(recording[writer.frames_written - 1].data, next(itertools.islice(
        noise_frames(), writer.frames_written - 1, None)).data)


def test_an_mp4_that_meets_a_full_disk_keeps_its_complete_fragments(small_disk):
    writer = Mp4Writer(small_disk / "out.mp4", 64, 32, 30, fragmented=True)
    rng = np.random.default_rng(4)
    with pytest.raises(VideoWriteError):
        while True:
            writer.write(rng.integers(0, 256, (32, 64, 3), dtype=np.uint8))
    assert writer.salvage() > 0 and not writer.partial.exists()
    kept = read_mp4_frames(small_disk / "out.mp4")          # decodes to its end
    assert writer.frames_written - 2 * 30 <= len(kept) < writer.frames_written   # lost: under two seconds
    # a writer that never completed a fragment keeps nothing, and says so
    empty = Mp4Writer(small_disk / "empty.mp4", 64, 32, 30, fragmented=True)
    empty.write(rng.integers(0, 256, (32, 64, 3), dtype=np.uint8))
    assert empty.salvage() == 0 and not (small_disk / "empty.mp4").exists() and not empty.partial.exists()
