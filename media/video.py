"""H.264 MP4 output through PyAV.

Written to `NAME.part` and renamed on success, so a failed or interrupted export never leaves a file that
looks finished. Disk errors become a one-line UserError naming the file.

A fragmented writer (takes) writes the index up front and the frames in one-second fragments, so after a disk
failure `salvage()` can keep every complete fragment: the file is cut after the last one and still plays.
"""

from __future__ import annotations

import os
from fractions import Fraction
from pathlib import Path

import av
import numpy as np

from alaya_errors import UserError
from gbuffer.formats.common import AtomicFile, CommitOnExit
from gbuffer.formats.pictures import rgb24
from gbuffer.size import H264_RULE, Size, SizeError


FRAGMENT_US = 1_000_000           # fragment length of a fragmented writer: at most this much is lost on failure


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
                 preset: str = "veryfast", fragmented: bool = False):
        self.path = check_output_file(path)
        try:
            Size(width, height).require_multiple(2, H264_RULE)
        except SizeError as exc:
            raise VideoWriteError(exc.detail, str(self.path)) from None
        self._target = AtomicFile(self.path, ".part")
        self.partial = self._target.tmp
        self.fragmented = fragmented
        self.width, self.height = width, height
        self.frames_written = 0
        try:
            options = ({"movflags": "empty_moov+default_base_moof+frag_keyframe",
                        "frag_duration": str(FRAGMENT_US)} if fragmented else {})
            self._container = av.open(str(self.partial), mode="w", format="mp4", options=options)
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
            if not self.fragmented:      # a fragmented file is kept for salvage(); the owner decides
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
            if not self.fragmented:      # kept for salvage(), as in _mux
                self.abort()
            raise VideoWriteError(f"cannot finish: {exc}", str(self.path)) from None
        return self.path

    def salvage(self) -> int:
        """After a write failure (disk full): keep the complete fragments of a fragmented file, cut after the
        last one, and move it into place. → bytes kept; 0 (and nothing kept) when not even one fragment was
        complete or the file is not fragmented."""
        try:
            self._container.close()
        except Exception:  # noqa: BLE001 - the muxer's output is broken after the failure; the cut repairs it
            pass
        kept = complete_fragments_end(self.partial) if self.fragmented and self.partial.exists() else 0
        if not kept:
            self._target.discard()
            return 0
        os.truncate(self.partial, kept)
        self._target.commit()
        return kept

    def abort(self) -> None:
        """Drop the partial file; the final path is left untouched."""
        try:
            self._container.close()
        except Exception:  # noqa: BLE001 - the container may already be broken; the partial goes anyway
            pass
        self._target.discard()


def complete_fragments_end(path: Path) -> int:
    """Byte offset just past the last complete movie fragment (moof + mdat) of a fragmented MP4; 0 when there
    is none. Walks the top-level boxes (32-bit size + type, or size 1 + 64-bit size)."""
    end = good = 0
    total = path.stat().st_size
    with open(path, "rb") as f:
        while end + 8 <= total:
            f.seek(end)
            head = f.read(16)
            size, kind = int.from_bytes(head[:4], "big"), head[4:8]
            if size == 1 and len(head) == 16:
                size = int.from_bytes(head[8:16], "big")
            if size < 8 or end + size > total:      # size 0 ("to the end") never comes from a fragmented writer
                break
            end += size
            if kind == b"mdat":
                good = end
    return good


def read_mp4_frames(path: str | Path) -> list[np.ndarray]:
    """Decode a whole (small) MP4 to RGB arrays; for tests and metrics."""
    with av.open(str(path)) as container:
        return [rgb24(f) for f in container.decode(video=0)]
