"""Recorded G-buffer formats: readers (RecordedSource subclasses), writers and `open_sequence`.

See docs/formats.md for the layouts and rules.
"""

from gbuffer.formats.clip import ClipFolderSource, write_clip_folder
from gbuffer.formats.common import DEFAULT_FPS
from gbuffer.formats.gbufzip import GbufZipSource, GbufZipWriter
from gbuffer.formats.imagefolder import ImageFolderSource, write_image_folder
from gbuffer.formats.npy import NpyWindowsSource, write_npy_windows
from gbuffer.formats.sequence import input_kind, open_sequence

__all__ = [
    "DEFAULT_FPS",
    "ClipFolderSource",
    "GbufZipSource",
    "GbufZipWriter",
    "ImageFolderSource",
    "NpyWindowsSource",
    "input_kind",
    "open_sequence",
    "write_clip_folder",
    "write_image_folder",
    "write_npy_windows",
]
