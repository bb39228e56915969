"""What the bench scripts share: the studio as a subprocess, the common flags, tables and JSON, and the timed
chunk loop of the renderer benchmarks.

Scripts run as modules of this package from the checkout's root (`python -m bench.webrtc_bench ...`), so they
import the project like any other code and none of them edits `sys.path`.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import os
import platform
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

ROOT = Path(__file__).resolve().parents[1]


# -- the studio as a subprocess (so its CPU time is its own) ---------------------------------------------------

def free_port() -> int:
    from studio.server.background import free_port as pick

    return pick()


def start_server(port: int, max_sessions: int, renderer: str, extra: Sequence[str] = (),
                 timeout: float = 180.0) -> subprocess.Popen:
    """`python app.py` on 127.0.0.1:`port`, returned once /api/health answers (not once its warm-ups are done)."""
    import httpx

    server = subprocess.Popen([sys.executable, str(ROOT / "app.py"), "--port", str(port), "--max-sessions",
                               str(max_sessions), "--renderer", renderer, *extra], cwd=ROOT)
    deadline = time.monotonic() + timeout   # importing Gradio and torch on a busy machine
    while True:
        try:
            httpx.get(f"http://127.0.0.1:{port}/api/health", timeout=2)
            return server
        except httpx.TransportError:
            if server.poll() is not None or time.monotonic() > deadline:
                stop(server)
                raise SystemExit("the studio did not start") from None
            time.sleep(0.05)


def stop(process: subprocess.Popen, timeout: float = 15.0) -> None:
    """Terminate a process this bench started (by its PID), killing it if it does not exit in `timeout` s."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@contextlib.contextmanager
def studio(max_sessions: int = 1, renderer: str = "reference", extra: Sequence[str] = ()) -> Iterator["Studio"]:
    """A studio subprocess for the length of a `with` block."""
    port = free_port()
    server = start_server(port, max_sessions, renderer, extra)
    try:
        yield Studio(f"http://127.0.0.1:{port}", server)
    finally:
        stop(server)


@dataclass
class Studio:
    url: str
    process: subprocess.Popen

    @property
    def pid(self) -> int:
        return self.process.pid


# Headless Debian Chromium that plays an aiortc stream (DESIGN.md's known pitfalls).
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--autoplay-policy=no-user-gesture-required"]


@contextlib.contextmanager
def studio_page(url: str) -> Iterator:
    """The studio page at `url` (its query included) in headless Chromium, 1280x900; closed on the way out."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.goto(url)
            yield page
        finally:
            browser.close()


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a process so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


# -- flags and output ------------------------------------------------------------------------------------------

def parser(doc: str, full_help: bool = False) -> argparse.ArgumentParser:
    """The script's parser with the flag every bench has: --json FILE (also write the results there)."""
    if full_help:
        p = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    else:
        p = argparse.ArgumentParser(description=doc.splitlines()[0])
    p.add_argument("--json", type=Path, help="also write the results here as JSON")
    return p


def size(text: str) -> tuple[int, int]:
    """'416x224' → (416, 224)."""
    w, h = (int(v) for v in text.lower().split("x"))
    return w, h


def write_json(path: Path | str | None, document: Any) -> None:
    if path:
        Path(path).write_text(json.dumps(document, indent=2, default=str) + "\n")   # default: Path arguments


def machine() -> dict:
    """What a figure was measured on, for the JSON: torch's version, the CPU count and the processor."""
    import torch

    return {"torch": torch.__version__, "cpu_count": os.cpu_count(),
            "machine": platform.processor() or platform.machine()}


def print_table(rows: Sequence[dict], columns: Sequence[tuple[str, str | Callable[[dict], Any]]]) -> None:
    """One line per row, right-aligned under its header; a column is (header, row key or function of the row)."""
    cells = [[str(value(r) if callable(value) else r[value]) for _, value in columns] for r in rows]
    widths = [max([len(header)] + [len(line[i]) for line in cells]) for i, (header, _) in enumerate(columns)]
    print(" ".join(header.rjust(w) for (header, _), w in zip(columns, widths)))
    for line in cells:
        print(" ".join(cell.rjust(w) for cell, w in zip(line, widths)), flush=True)


# -- the renderer benchmarks: their input and the timed chunk loop --

@functools.lru_cache(maxsize=8)
def synthetic_frames(count: int, width: int, height: int) -> tuple:
    """The synthetic G-buffer scene (renderer.reference.synthetic), `count` frames at 30 fps, made once."""
    from renderer.reference.synthetic import synthetic_gbuffer

    return tuple(synthetic_gbuffer(width, height, i / 30, i) for i in range(count))


# -- the timed chunk loop --------------------------------------------------------------------------------------

@dataclass
class ChunkTiming:
    frames: int
    seconds: float            # the chunk's start → its last frames out
    first_out_seconds: float  # the chunk's start → its first frames out (what a live viewer waits)
    timings_ms: dict[str, float]


def timed_chunks(session, frames: Sequence, conditioning: Callable[[int], Any],
                 warmup_chunks: int = 2) -> tuple[list[ChunkTiming], int]:
    """Render `frames` chunk by chunk as a live session does (`render_stream`), chunk k with
    `conditioning(k)` on every frame. Returns the timings of the chunks after the first `warmup_chunks` and
    the peak memory in bytes over all of them (0 where the renderer measures none)."""
    size = session.chunk_size
    timed, peak = [], 0
    for k, start in enumerate(range(0, len(frames), size)):
        chunk = frames[start:start + size]
        cond = [conditioning(k)] * len(chunk)
        t = time.perf_counter()
        first = None
        for result in session.render_stream(chunk, cond):  # noqa: B007 - the last result is read after the loop
            first = first if first is not None else time.perf_counter() - t
        seconds = time.perf_counter() - t
        peak = max(peak, result.peak_memory_bytes or 0)
        if k >= warmup_chunks:
            timed.append(ChunkTiming(len(chunk), seconds, first, dict(result.timings_ms)))
    return timed, peak


# Free-text prompts the flash benches cache text embeddings for (a random model has no text encoder).
FLASH_PROMPTS = ("a neon cyberpunk city at night", "an erupting volcano landscape")


def flash_rollout(renderer, frames: Sequence, width: int, height: int, warmup_chunks: int = 2,
                  switch_every: int = 5) -> dict:
    """The flash benches' figures: FPS, per-stage ms per chunk (means), peak memory, the session's state size,
    and `first_out_ratio`, the median share of a chunk a viewer waits before its first frames (frames leave
    as their latent frame is decoded). The prompt switches among FLASH_PROMPTS every `switch_every` chunks."""
    from prompt_presets.conditioning import Conditioning

    def prompt(k: int):
        return Conditioning.single(FLASH_PROMPTS[(k // switch_every) % len(FLASH_PROMPTS)])

    with renderer.open_session(width, height, seed=0) as session:
        chunks, peak = timed_chunks(session, frames, prompt, warmup_chunks)
        state = session.state_bytes()
    rendered, seconds = sum(c.frames for c in chunks), sum(c.seconds for c in chunks)
    ratios = sorted(c.first_out_seconds / c.seconds for c in chunks)
    stages = {name: [c.timings_ms[name] for c in chunks] for name in (chunks[0].timings_ms if chunks else {})}
    return {"frames_timed": rendered, "fps": rendered / seconds if seconds else float("nan"),
            "first_out_ratio": round(ratios[len(ratios) // 2], 3) if ratios else None,
            "ms_per_chunk": {k: round(sum(v) / len(v), 2) for k, v in stages.items()},
            "chunks_timed": max(1, len(chunks)), "peak_memory_gib": round(peak / 2**30, 3),
            "session_state_mib": round(state / 2**20, 2)}
