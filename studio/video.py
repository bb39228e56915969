"""H.264 MP4 output through PyAV.

Written to `NAME.part` and renamed on success, so a failed or interrupted export never leaves a file that
looks finished. Disk errors become a one-line UserError naming the file.
"""

from __future__ import annotations

import os
from fractions import Fraction
from pathlib import Path

import av
import numpy as np

from alaya_errors import UserError
from gbuffer.formats.common import AtomicFile, CommitOnExit
from gbuffer.size import H264_RULE, Size, SizeError


class VideoWriteError(UserError):
    """The MP4 could not be written (unwritable path, disk full, bad size)."""


def check_output_file(path: str | Path) -> Path:
    """Refuse an output path that cannot be written, before any frame is rendered."""
    path = Path(path)
    if path.is_dir():
        raise VideoWriteError("is a directory; give a file name ending in .mp4", str(path))
    parent = path.parent
    if not parent.is_dir():
        raise VideoWriteError(f"folder {parent} does not exist", str(path))
    if not os.access(parent, os.W_OK):
        raise VideoWriteError(f"folder {parent} is not writable", str(path))
    return path


class Mp4Writer(CommitOnExit):
    def __init__(self, path: str | Path, width: int, height: int, fps: float, *, crf: int = 18,
                 preset: str = "veryfast"):
        self.path = check_output_file(path)
        try:
            Size(width, height).require_multiple(2, H264_RULE)
        except SizeError as exc:
            raise VideoWriteError(exc.detail, str(self.path)) from None
        self._target = AtomicFile(self.path, ".part")
        self.partial = self._target.tmp
        self.width, self.height = width, height
        self.frames_written = 0
        try:
            self._container = av.open(str(self.partial), mode="w", format="mp4")
        except (OSError, av.FFmpegError) as exc:
            raise VideoWriteError(f"cannot write: {exc}", str(self.path)) from None
        rate = Fraction(fps).limit_denominator(1001)
        self._stream = self._container.add_stream("libx264", rate=rate)
        self._stream.width, self._stream.height = width, height
        self._stream.pix_fmt = "yuv420p"
        self._stream.options = {"crf": str(crf), "preset": preset}

    def write(self, rgb: np.ndarray) -> None:
        """rgb: uint8 (H, W, 3) at the writer's size."""
        if rgb.shape != (self.height, self.width, 3):
            raise VideoWriteError(f"frame of shape {rgb.shape}, expected {(self.height, self.width, 3)}",
                                  str(self.path))
        frame = av.VideoFrame.from_ndarray(np.ascontiguousarray(rgb), format="rgb24")
        self._mux(self._stream.encode(frame))
        self.frames_written += 1

    def _mux(self, packets) -> None:
        try:
            self._container.mux(packets)
        except (OSError, av.FFmpegError) as exc:
            self.abort()
            raise VideoWriteError(f"cannot write: {exc}", str(self.path)) from None

    def close(self) -> Path:
        """Flush, finish the file and move it into place. Returns the final path."""
        if self.frames_written == 0:
            self.abort()
            raise VideoWriteError("no frames were rendered, so no video was written", str(self.path))
        self._mux(self._stream.encode(None))
        try:
            self._container.close()
            self._target.commit()
        except (OSError, av.FFmpegError) as exc:
            self.abort()
            raise VideoWriteError(f"cannot finish: {exc}", str(self.path)) from None
        return self.path

    def abort(self) -> None:
        """Drop the partial file; the final path is left untouched."""
        try:
            self._container.close()
        except Exception:  # noqa: BLE001 - the container may already be broken; the partial goes anyway
            pass
        self._target.discard()


def read_mp4_frames(path: str | Path) -> list[np.ndarray]:
    """Decode a whole (small) MP4 to RGB arrays; for tests and metrics."""
    with av.open(str(path)) as container:
        return [f.to_ndarray(format="rgb24") for f in container.decode(video=0)]
