"""`open_sequence`: turn the paths a user gives into one RecordedSource, picking the reader by what they are."""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from gbuffer.formats.clip import ClipFolderSource, clip_channel
from gbuffer.formats.common import check_fps, natural_key
from gbuffer.formats.gbufzip import GbufZipSource
from gbuffer.formats.imagefolder import ImageFolderSource, is_image_folder
from gbuffer.formats.npy import NpyWindowsSource, is_rgb_sibling
from gbuffer.frame import GBufferError
from gbuffer.source import RecordedSource

KIND_NAMES = {
    "npy": ".npy windows",
    "gbuf": "a .gbuf.zip recording",
    "clip": "a clip folder",
    "images": "an image folder",
}
ACCEPTED = "a .npy window (or a folder of them), a .gbuf.zip, a clip folder (or one of its .mp4) or an image folder"


def input_kind(path: Path) -> str:
    """One of KIND_NAMES' keys. A folder is a clip folder if it holds channel videos, else an image folder
    if it holds channel images, else .npy windows if it holds .npy files."""
    if not path.exists():
        raise GBufferError("file or folder not found", str(path))
    if path.is_file():
        name = path.name.lower()
        if name.endswith(".npy"):
            return "npy"
        if name.endswith(".zip"):
            return "gbuf"
        if clip_channel(path):
            return "clip"
    elif path.is_dir():
        if any(clip_channel(p) for p in path.iterdir()):
            return "clip"
        if is_image_folder(path):
            return "images"
        if _npy_files(path):
            return "npy"
    raise GBufferError(f"unknown input kind; expected {ACCEPTED}", str(path))


def _npy_files(folder: Path) -> list[Path]:
    return sorted((p for p in folder.iterdir()
                   if p.suffix.lower() == ".npy" and p.is_file() and not is_rgb_sibling(p)),
                  key=lambda p: natural_key(p.name))


def open_sequence(inputs: Sequence[str | Path] | str | Path, fps: float | None = None) -> RecordedSource:
    """Open one sequence. Several inputs are allowed only as .npy windows (files or folders of them),
    which play in the given order. `fps` overrides the files' own rate (default: theirs, else 30)."""
    paths = [Path(inputs)] if isinstance(inputs, (str, Path)) else [Path(p) for p in inputs]
    if not paths:
        raise GBufferError("no input given; expected " + ACCEPTED)
    fps = check_fps(fps, "fps")
    kinds = [input_kind(p) for p in paths]
    if len(set(kinds)) > 1:
        listing = ", ".join(f"{p.name} is {KIND_NAMES[k]}" for p, k in zip(paths, kinds))
        raise GBufferError(f"cannot mix input kinds in one sequence: {listing}")
    kind = kinds[0]
    if kind == "npy":
        windows = [w for p in paths for w in (_npy_files(p) if p.is_dir() else [p])]
        return NpyWindowsSource(windows, fps=fps)
    if len(paths) > 1:
        raise GBufferError(f"only .npy windows can be chained; got {len(paths)} inputs that are each "
                           f"{KIND_NAMES[kind]}")
    opener = {"gbuf": GbufZipSource, "clip": ClipFolderSource, "images": ImageFolderSource}[kind]
    return opener(paths[0], fps=fps)
