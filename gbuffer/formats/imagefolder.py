"""Image folders: one image per channel per frame, PNG (8/16-bit) or float EXR.

Two layouts are accepted (docs/formats.md):
- one sub-folder per channel: `albedo/0000.png`, `depth/0000.exr`, ...; a frame's images share a file stem;
- channel-suffixed names in one folder: `0000_albedo.png` or `0000.albedo.png` (`<frame>[_.]<channel>.<ext>`).
Frames play in natural order of their stem ('frame2' before 'frame10').
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Iterable

import numpy as np

from gbuffer.formats.common import DEFAULT_FPS, check_fps, check_same_size, natural_key
from gbuffer.formats.imagefile import decode_png, encode_png, read_exr
from gbuffer.frame import CHANNELS, GBufferError, GBufferFrame
from gbuffer.source import RecordedSource

IMAGE_SUFFIXES = (".png", ".exr")
_SUFFIXED = re.compile(rf"(?P<key>.+)[._](?P<channel>{'|'.join(CHANNELS)})\.(?:png|exr)", re.IGNORECASE)


def _images(folder: Path) -> list[Path]:
    return [p for p in folder.iterdir() if p.is_file() and p.suffix.lower() in IMAGE_SUFFIXES]


def _channel_folders(folder: Path) -> dict[str, dict[str, Path]] | None:
    """{channel: {frame key: file}} for the sub-folder layout, or None if the folder does not use it."""
    subdirs = {p.name.lower(): p for p in folder.iterdir() if p.is_dir()}
    present = [c for c in CHANNELS if c in subdirs]
    if not present:
        return None
    missing = [c for c in CHANNELS if c not in subdirs]
    if missing:
        raise GBufferError(f"has channel folder(s) {', '.join(present)} but not {', '.join(missing)}",
                           str(folder))
    return {c: {p.stem: p for p in _images(subdirs[c])} for c in CHANNELS}


def _suffixed_files(folder: Path) -> dict[str, dict[str, Path]]:
    """{channel: {frame key: file}} for channel-suffixed names in one folder."""
    found: dict[str, dict[str, Path]] = {c: {} for c in CHANNELS}
    for p in _images(folder):
        if m := _SUFFIXED.fullmatch(p.name):
            found[m.group("channel").lower()][m.group("key")] = p
    return found


def is_image_folder(folder: Path) -> bool:
    """Cheap test used by `open_sequence`: channel sub-folders or channel-suffixed images present."""
    if any(p.is_dir() and p.name.lower() in CHANNELS for p in folder.iterdir()):
        return True
    return any(_SUFFIXED.fullmatch(p.name) for p in _images(folder))


class ImageFolderSource(RecordedSource):
    """Frames from an image folder. `depth_scale` converts EXR depth units to metres (e.g. 0.01 for cm)."""

    def __init__(self, folder: str | Path, fps: float | None = None, depth_scale: float = 1.0):
        self.folder = Path(folder)
        self.name = self.folder.name
        where = str(self.folder)
        if not self.folder.is_dir():
            raise GBufferError("folder not found", where)
        self.fps = check_fps(fps, where) or DEFAULT_FPS
        self.depth_scale = float(depth_scale)
        by_channel = _channel_folders(self.folder) or _suffixed_files(self.folder)
        self.frames = self._match_frames(by_channel, where)  # [{channel: file}] in play order
        self._size: tuple[int, int] | None = None          # (H, W): the first frame's albedo sets it
        height, width = self._load(0)[0].shape[:2]
        self._size = self.height, self.width = height, width

    @staticmethod
    def _match_frames(by_channel: dict[str, dict[str, Path]], where: str) -> list[dict[str, Path]]:
        keys = set().union(*(files.keys() for files in by_channel.values()))
        if not keys:
            raise GBufferError("no PNG or EXR images for the channels "
                               f"({', '.join(CHANNELS)}); see docs/formats.md for the accepted layouts", where)
        for channel, files in by_channel.items():
            if lacking := sorted(keys - files.keys(), key=natural_key):
                shown = ", ".join(repr(k) for k in lacking[:3]) + (" ..." if len(lacking) > 3 else "")
                raise GBufferError(f"{channel} has {len(files)} images but the folder has {len(keys)} frames; "
                                   f"no {channel} image for frame(s) {shown}", where)
        return [{c: by_channel[c][k] for c in CHANNELS} for k in sorted(keys, key=natural_key)]

    def _load(self, index: int) -> list[np.ndarray]:
        images = []
        for channel, path in self.frames[index].items():
            if path.suffix.lower() == ".exr":
                images.append(read_exr(path, channel, self.depth_scale))
            else:
                images.append(decode_png(path, str(path)))
        # The first frame's albedo sets the sequence size; every image must match it.
        expected = images[0].shape[:2] if self._size is None else self._size
        for path, image in zip(self.frames[index].values(), images):
            check_same_size(image.shape[:2], expected, "image", str(path))
        return images

    def __len__(self) -> int:
        return len(self.frames)

    def read(self, index: int) -> GBufferFrame:
        return GBufferFrame(index, index / self.fps, np.stack(self._load(index)),
                            {"file": self.frames[index][CHANNELS[0]].name})


def write_image_folder(frames: Iterable[GBufferFrame], out_dir: str | Path, layout: str = "folders") -> list[Path]:
    """Write 8-bit PNGs: layout "folders" (`albedo/000000.png`) or "suffixed" (`000000_albedo.png`).

    Returns the written files. Mainly for fixtures and for handing frames to image tools.
    """
    if layout not in ("folders", "suffixed"):
        raise GBufferError(f"layout must be 'folders' or 'suffixed', got {layout!r}")
    out_dir = Path(out_dir)
    written = []
    for n, frame in enumerate(frames):
        for channel, image in zip(CHANNELS, frame.data):
            if layout == "folders":
                path = out_dir / channel / f"{n:06d}.png"
            else:
                path = out_dir / f"{n:06d}_{channel}.png"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(encode_png(image))
            written.append(path)
    if not written:
        raise GBufferError("no frames to write", str(out_dir))
    return written
