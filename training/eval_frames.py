"""A test recording held in memory at the eval size, and played back as a source.

Every scorer of `alaya-studio eval` reads the same frames: the model (streamed through the studio's Rollout and
the renderer's own session), the baselines and the style targets. So the G-buffer is decoded and resized once
(training.data.load_recording, as training resizes) and never differs between them.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from gbuffer.formats import open_sequence
from gbuffer.frame import GBufferFrame
from gbuffer.source import RecordedSource
from training.data import Recording, load_recording
from training.errors import TrainingError
from training.style_targets import TARGET_FPS


@dataclass
class HeldOutRecording:
    path: Path
    recording: Recording          # (N, 5, 3, H, W) / (N, 3, H, W) uint8 at the eval size
    fps: float

    @property
    def name(self) -> str:
        return self.path.name

    def __len__(self) -> int:
        return len(self.recording)

    def gbuffer(self, start: int = 0, stop: int | None = None) -> np.ndarray:
        """uint8 (n, 5, H, W, 3), the frame layout."""
        return self.recording.gbuffer[start:stop].permute(0, 1, 3, 4, 2).contiguous().numpy()

    def rgb(self) -> np.ndarray:
        return self.recording.rgb.permute(0, 2, 3, 1).contiguous().numpy()

    def source(self) -> "FrameSequence":
        """Frame i at time i / TARGET_FPS, the time its style target is drawn at (animated effects agree)."""
        return FrameSequence(self.recording, TARGET_FPS, self.name)

    def frame_digests(self) -> set[str]:
        """One per frame, of its G-buffer bytes: recordings sharing a frame share its digest."""
        return {hashlib.sha256(g.numpy().tobytes()).hexdigest() for g in self.recording.gbuffer}

    def part(self, start: int, frames: int) -> "HeldOutRecording":
        """Frames start .. start + frames, renumbered from 0: a stream over it, its G-buffer frames and its style
        targets all index the part (animated looks are drawn at the part's own times, as a stream of it is)."""
        r = self.recording
        cut = slice(start, start + frames)
        return HeldOutRecording(self.path, Recording(r.name, r.gbuffer[cut], r.rgb[cut], r.prompt), self.fps)

    def looped(self, frames: int) -> "HeldOutRecording":
        """`frames` frames played forward, backward, forward...: a longer rollout over the same world without
        a jump in the geometry (the eight-worlds rollout needs 637)."""
        n = len(self)
        period = list(range(n)) + list(range(n - 2, 0, -1)) if n > 1 else [0]
        order = torch.tensor([period[i % len(period)] for i in range(frames)])
        r = self.recording
        return HeldOutRecording(self.path, Recording(r.name, r.gbuffer[order], r.rgb[order], r.prompt), self.fps)


def open_held_out(path: str | Path, size: tuple[int, int] | None, frames: int | None) -> HeldOutRecording:
    """A paired recording at `size` (default its own), its first `frames` frames; refused without RGB."""
    path = Path(path)
    with open_sequence(path) as source:
        if not getattr(source, "paired", False):
            raise TrainingError("has no RGB stream to score against (record it with --rgb)", str(path))
        w, h = size or (source.width, source.height)
        fps = source.fps
    whole = HeldOutRecording(path, load_recording(path, w, h, "original"), fps)
    return whole if frames is None else whole.part(0, frames)


class FrameSequence(RecordedSource):
    """A Recording as a recorded source (frame i at time i / fps, its RGB attached)."""

    def __init__(self, recording: Recording, fps: float, name: str):
        self.recording, self.fps, self.name = recording, fps, name
        self.height, self.width = recording.gbuffer.shape[-2:]
        self.paired = True

    def __len__(self) -> int:
        return len(self.recording)

    def read(self, index: int) -> GBufferFrame:
        data = self.recording.gbuffer[index].permute(0, 2, 3, 1).contiguous().numpy()
        rgb = self.recording.rgb[index].permute(1, 2, 0).contiguous().numpy()
        return GBufferFrame(index, index / self.fps, data, rgb=rgb)
