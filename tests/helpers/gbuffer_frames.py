"""Random G-buffer frames for the flash decoder's stages (the refiner, the guide) and the tensor a session hands
them at decode."""

from __future__ import annotations

import numpy as np
import torch

from gbuffer.frame import GBufferFrame


def mid_range_frames(n: int, width: int, height: int, seed: int = 0) -> list[GBufferFrame]:
    """Mid-range values, so that a stage's output stays clear of its clamp."""
    rng = np.random.default_rng(seed)
    return [GBufferFrame(i, i / 10, rng.integers(64, 192, (5, height, width, 3), dtype=np.uint8)) for i in range(n)]


def as_gbuffer(frames: list[GBufferFrame]) -> torch.Tensor:
    """→ (1, T, 5, 3, H, W) in [0, 1], as the session hands it to decode."""
    return torch.from_numpy(np.stack([f.data for f in frames])).permute(0, 1, 4, 2, 3)[None].float() / 255


def renders_alike(a, b, frames: list[GBufferFrame], width: int, height: int) -> bool:
    """Whether two flash pipelines (say, one saved and loaded back) render `frames` under one prompt, in one
    chunk, to the same bytes."""
    from prompt_presets.resolve import conditioning_for
    from renderer.flash.session import FlashSession

    outs = []
    for p in (a, b):
        with FlashSession(p, width, height, seed=0, chunk_size=len(frames)) as s:
            outs.append(s.render(frames, [conditioning_for("polar")] * len(frames)).rgb)
    return bool(np.array_equal(*outs))


def whole_and_streamed(pipe, frames: list[GBufferFrame], width: int, height: int, prompt: str = "cyberpunk"
                       ) -> tuple[np.ndarray, list[np.ndarray]]:
    """`frames` rendered chunk by chunk as whole chunks (uint8 (N, H, W, 3)), and again by `render_stream` (each
    result's frames, in order): what a live session sends against what a batch render gives."""
    from prompt_presets.resolve import conditioning_for
    from renderer.flash.session import FlashSession

    cond, n = [conditioning_for(prompt)] * len(frames), pipe.config.chunk_frames
    with FlashSession(pipe, width, height, seed=0, chunk_size=n) as session:
        whole = np.concatenate([session.render(frames[i:i + n], cond[i:i + n]).rgb
                                for i in range(0, len(frames), n)])
    with FlashSession(pipe, width, height, seed=0, chunk_size=n) as session:
        parts = [r.rgb for i in range(0, len(frames), n) for r in session.render_stream(frames[i:i + n], cond[i:i + n])]
    return whole, parts
