"""Offline render: a rollout written to an H.264 MP4, with a metrics JSON.

Used by `alaya-studio render` and, later, the UI's "render to MP4".
"""

from __future__ import annotations

import json
import queue
import statistics
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np
from PIL import Image, ImageDraw

from gbuffer.frame import CHANNELS, GBufferFrame
from renderer.timing import process_peak_rss_bytes
from timeline.rollout import Rollout
from media.video import Mp4Writer


@dataclass
class RenderMetrics:
    frames: int = 0
    seconds: float = 0.0
    fps: float = 0.0
    width: int = 0
    height: int = 0
    renderer: str = ""
    # per-frame milliseconds by stage (chunk time / chunk length), median over the run
    stage_ms_median: dict[str, float] = field(default_factory=dict)
    encode_ms_median: float = 0.0
    peak_rss_bytes: int = 0
    peak_renderer_memory_bytes: int | None = None
    segments: list[dict] = field(default_factory=list)

    def to_json(self) -> dict:
        return asdict(self)


def side_by_side(rgb: np.ndarray, gbuffer: GBufferFrame) -> np.ndarray:
    """A 3x2 grid at the output size per tile: output, albedo, depth / metallic, normal, roughness, labelled."""
    h, w = rgb.shape[:2]
    tiles = [("output", rgb)]
    for name in CHANNELS:
        ch = gbuffer.channel(name)
        if ch.shape[:2] != (h, w):
            ch = np.asarray(Image.fromarray(ch).resize((w, h), Image.Resampling.NEAREST))
        tiles.append((name, ch))
    grid = np.zeros((2 * h, 3 * w, 3), np.uint8)
    for k, (_, img) in enumerate(tiles):
        r, c = divmod(k, 3)
        grid[r * h:(r + 1) * h, c * w:(c + 1) * w] = img
    canvas = Image.fromarray(grid)
    draw = ImageDraw.Draw(canvas)
    for k, (name, _) in enumerate(tiles):
        r, c = divmod(k, 3)
        draw.text((c * w + 6, r * h + 4), name, fill=(255, 255, 255), stroke_width=2, stroke_fill=(0, 0, 0))
    return np.asarray(canvas)


def render_to_mp4(rollout: Rollout, out_path: str | Path, *, frames: int | None, fps: float,
                  renderer_name: str = "", sbs: bool = False,
                  on_frame: Callable[[int], object] | None = None) -> RenderMetrics:
    """Render up to `frames` frames (None = until a recorded source ends) into `out_path`."""
    session = rollout.session
    width, height = session.width, session.height
    out_w, out_h = (3 * width, 2 * height) if sbs else (width, height)
    metrics = RenderMetrics(width=width, height=height, renderer=renderer_name)
    per_stage: dict[str, list[float]] = {}
    encode_ms: list[float] = []
    peak_mem: int | None = None
    last_prompt = None
    t_start = time.perf_counter()
    with Mp4Writer(out_path, out_w, out_h, fps) as writer, _EncoderThread(writer, encode_ms) as encoder:
        while frames is None or metrics.frames < frames:
            chunk = rollout.next_chunk()
            if not chunk:
                break
            if frames is not None:
                chunk = chunk[: frames - metrics.frames]
            first = chunk[0]
            for stage, ms in first.chunk_timings_ms.items():
                per_stage.setdefault(stage, []).append(ms / first.chunk_size)
            if first.peak_memory_bytes is not None:
                peak_mem = max(peak_mem or 0, first.peak_memory_bytes)
            for rf in chunk:
                dominant = rf.conditioning.dominant
                prompt = dominant.preset or dominant.text[:60]
                if prompt != last_prompt:  # where the dominant prompt changes: a segment as viewers see it
                    metrics.segments.append({"frame": rf.index, "prompt": prompt})
                    last_prompt = prompt
                encoder.put(side_by_side(rf.rgb, rf.gbuffer) if sbs else rf.rgb)
                metrics.frames += 1
                if on_frame:
                    on_frame(rf.index)
    metrics.seconds = time.perf_counter() - t_start
    metrics.fps = metrics.frames / metrics.seconds if metrics.seconds > 0 else 0.0
    metrics.stage_ms_median = {k: round(statistics.median(v), 3) for k, v in per_stage.items()}
    metrics.encode_ms_median = round(statistics.median(encode_ms), 3) if encode_ms else 0.0
    metrics.peak_rss_bytes = process_peak_rss_bytes()
    metrics.peak_renderer_memory_bytes = peak_mem
    return metrics


class _EncoderThread:
    """Encodes on a thread of its own, so frame k is encoded while frame k+1 is read and rendered (the GL renderer
    and the engine wait for their pixels without holding the GIL). At most `depth` frames wait; an encoder error
    comes back on the next `put` or at the end."""

    def __init__(self, writer: Mp4Writer, encode_ms: list[float], depth: int = 4):
        self.writer, self.encode_ms = writer, encode_ms
        self._frames: queue.Queue = queue.Queue(depth)
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="alaya-offline-encode", daemon=True)

    def __enter__(self) -> "_EncoderThread":
        self._thread.start()
        return self

    def put(self, rgb: np.ndarray) -> None:
        self._raise()
        self._frames.put(rgb)

    def _run(self) -> None:
        while (rgb := self._frames.get()) is not None:
            if self._error is not None:
                continue              # drain: the main thread learns of the error on its next put
            try:
                t0 = time.perf_counter()
                self.writer.write(rgb)
                self.encode_ms.append((time.perf_counter() - t0) * 1e3)
            except BaseException as exc:  # noqa: BLE001 - handed to the main thread
                self._error = exc

    def _raise(self) -> None:
        if self._error is not None:
            raise self._error

    def __exit__(self, exc_type, *exc) -> None:
        self._frames.put(None)
        self._thread.join()
        if exc_type is None:
            self._raise()


def write_metrics(metrics: RenderMetrics, path: str | Path, extra: dict | None = None) -> None:
    data = {**metrics.to_json(), **(extra or {})}
    Path(path).write_text(json.dumps(data, indent=2) + "\n")
