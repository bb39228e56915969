"""Colour conversions (gbuffer/formats/pictures.py): right colours, and safe for a process forked from another thread.

The second test covers how CI hung on 2026-12-07. PyAV keeps a converter per thread. When a process is forked from
another thread and runs Python before its exec (as Ray's `ray.init` does), the child frees that converter. If it
was multi-threaded, the child hangs, and so does the parent that waits for it. The scenario runs in a child
Python, so a hang costs that child, not this test process."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

import numpy as np

from gbuffer.formats.pictures import convert, rgb24, yuv420p


def test_rgb_goes_to_yuv420p_and_back_within_the_chroma_error():
    rgb = np.zeros((32, 48, 3), np.uint8)
    rgb[:, :24] = (200, 40, 40)
    rgb[:, 24:] = (30, 160, 220)
    frame = yuv420p(rgb)
    assert (frame.format.name, frame.width, frame.height) == ("yuv420p", 48, 32)
    assert convert(frame, "yuv420p").format.name == "yuv420p"
    back = rgb24(frame)
    assert back.shape == rgb.shape and back.dtype == np.uint8
    assert np.abs(back.astype(int) - rgb).mean() < 4, "flat colours survive 4:2:0"


SPAWN_AFTER_CONVERTING = textwrap.dedent("""
    import subprocess, threading
    import numpy as np
    from gbuffer.formats.pictures import convert, rgb24, yuv420p

    frame = yuv420p(np.zeros((96, 160, 3), np.uint8))   # the main thread now holds PyAV's converter
    rgb24(frame)
    convert(frame, "rgb24")
    started = threading.Event()

    def spawn():   # like ray.init from the studio's start-up thread: Python runs in the child before its exec
        subprocess.run(["true"], preexec_fn=lambda: None, check=True)
        started.set()

    threading.Thread(target=spawn, daemon=True).start()
    print("spawned" if started.wait(30) else "hung", flush=True)
""")


def test_a_process_forked_from_another_thread_starts_after_the_main_thread_converted_frames(tmp_path):
    said = tmp_path / "said.txt"        # a file, not a pipe: a hung grandchild would hold a pipe open
    with said.open("w") as out:
        child = subprocess.Popen([sys.executable, "-c", SPAWN_AFTER_CONVERTING], stdout=out, start_new_session=True)
    try:
        child.wait(timeout=60)
    finally:
        try:
            os.killpg(child.pid, signal.SIGKILL)    # a hung grandchild stays in the group: stop it too
        except ProcessLookupError:
            pass
    assert said.read_text().strip() == "spawned"
