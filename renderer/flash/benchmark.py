"""Shared by the flash benchmarks (bench/flash_cpu.py, bench/flash_gpu.py): a synthetic G-buffer stream and a
timed rollout."""

from __future__ import annotations

import time

import numpy as np

from gbuffer.frame import GBufferFrame
from prompt_presets.conditioning import Conditioning

STYLE_PROMPTS = ("a neon cyberpunk city at night", "an erupting volcano landscape")


def synthetic_frames(n: int, width: int, height: int, seed: int = 0) -> list[GBufferFrame]:
    """Smoothly moving gradients per channel (cheap to make, not constant, so codecs do real work)."""
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:height, 0:width].astype(np.float32)
    base = rng.random((5, 3), dtype=np.float32)
    frames = []
    for i in range(n):
        phase = (xx / width + yy / height + i / 60.0)[None, :, :, None]
        img = (np.sin(2 * np.pi * (phase + base[:, None, None, :])) * 0.5 + 0.5) * 255
        frames.append(GBufferFrame(i, i / 30.0, img.astype(np.uint8)))
    return frames


def timed_rollout(renderer, frames: list[GBufferFrame], width: int, height: int, warmup_chunks: int = 2,
                  switch_every: int = 5) -> dict:
    """Render all frames chunk by chunk, switching prompt every `switch_every` chunks; figures exclude warm-up.

    Chunks stream (render_stream) as a live session receives them: `first_out_ratio` is the median of (chunk
    start → its first frames out) / (chunk start → its last frames out), the share of a chunk a viewer waits
    before its first frame."""
    size = renderer.chunk_size
    stages: dict[str, list[float]] = {}
    rendered, seconds, peak, ratios = 0, 0.0, 0, []
    with renderer.open_session(width, height, seed=0) as session:
        for k, start in enumerate(range(0, len(frames), size)):
            chunk = frames[start:start + size]
            prompt = STYLE_PROMPTS[(k // switch_every) % len(STYLE_PROMPTS)]
            t = time.perf_counter()
            first = None
            for result in session.render_stream(chunk, [Conditioning.single(prompt)] * len(chunk)):
                first = first if first is not None else time.perf_counter() - t
            dt = time.perf_counter() - t
            peak = max(peak, result.peak_memory_bytes or 0)
            if k < warmup_chunks:
                continue
            rendered, seconds = rendered + len(chunk), seconds + dt
            ratios.append(first / dt)
            for name, ms in result.timings_ms.items():
                stages.setdefault(name, []).append(ms)
        state = session.state_bytes()
    chunks = max(1, len(next(iter(stages.values()), [0])))
    return {"frames_timed": rendered, "fps": rendered / seconds if seconds else float("nan"),
            "first_out_ratio": round(sorted(ratios)[len(ratios) // 2], 3) if ratios else None,
            "ms_per_chunk": {k: round(sum(v) / len(v), 2) for k, v in stages.items()},
            "chunks_timed": chunks, "peak_memory_gib": round(peak / 2**30, 3),
            "session_state_mib": round(state / 2**20, 2)}
