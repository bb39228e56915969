"""Our recording format `.gbuf.zip`: written frame by frame, read with random access, lossless.

Archive layout (every entry stored, not deflated: PNG already compresses):

    frames/000000.png    one frame: the 5 channels stacked vertically, RGB uint8 (5*H, W, 3) in CHANNELS order
    frames/000000.json   that frame's metadata, only when it has any
    rgb/000000.png       that frame's paired RGB image (H, W, 3), only in paired recordings (every frame has one)
    sun/000000.png       that frame's sun visibility, grey (H, W), only where the engine gives one (every frame has
                         one; the manifest says "sun": "png-grey8"); older archives have none and still load
    ...
    manifest.json        written last, by close(): see `Manifest` below and docs/formats.md

The writer fills `<path>.tmp` and renames it on close, so an interrupted recording never appears at `path`;
a reader refuses archives without a manifest or whose frames disagree with it.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import re
import zipfile
from dataclasses import asdict, is_dataclass
from pathlib import Path
from typing import Any, Final, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, StrictInt, field_validator, model_validator

from alaya_errors import field_error, validate

from gbuffer.formats.common import AtomicFile, CommitOnExit, check_fps, check_same_size
from gbuffer.formats.imagefile import decode_png, encode_png, png_size
from gbuffer.frame import CHANNELS, NUM_CHANNELS, GBufferError, GBufferFrame, check_frame_array
from gbuffer.source import RecordedSource

# Manifest's fields spell these out again, as Literal[...] takes values, not names; mypy checks that they agree.
FORMAT_NAME: Final = "alaya-gbuf"
FORMAT_VERSION = 1
FRAME_LAYOUT: Final = "png-rgb8-channels-stacked-vertically"
RGB_LAYOUT: Final = "png-rgb8"
SUN_LAYOUT: Final = "png-grey8"
MANIFEST_NAME = "manifest.json"
_FRAME_ENTRY = re.compile(r"frames/(\d{6,})\.png")
_RGB_ENTRY = re.compile(r"rgb/(\d{6,})\.png")
_SUN_ENTRY = re.compile(r"sun/(\d{6,})\.png")

# What an archive may ask of memory (issue 42: a 305 KB upload whose manifest inflated to 300 MB). Every member is
# judged by its declared size and its compression ratio before a byte is inflated, then read in pieces, and a
# frame's PNG by the pixels its header declares before it is decoded.
MAX_PIXELS = 3840 * 2160            # per channel image: 4K, above any size the studio renders
MAX_MANIFEST_BYTES = 16 * 2**20     # a timestamp and a little metadata per frame: ~20 bytes x 100,000s of frames
MAX_META_BYTES = 2**20              # one frame's metadata (the camera, the player's input)
MAX_RATIO = 200                     # deflate allows ~1000:1; real PNGs and JSON stay far below 200:1
MIN_RATIO_ALLOWANCE = 2**16         # tiny members (a short JSON) may exceed the ratio
READ_PIECE = 2**20


def frame_entry(index: int, suffix: str = "png") -> str:
    return f"frames/{index:06d}.{suffix}"


def rgb_entry(index: int) -> str:
    return f"rgb/{index:06d}.png"


def sun_entry(index: int) -> str:
    return f"sun/{index:06d}.png"


class Manifest(BaseModel):
    """`manifest.json`: what a reader needs before touching any frame (validated field by field)."""

    model_config = ConfigDict(extra="ignore")      # later versions add fields; this reader skips them

    width: StrictInt = Field(ge=1)
    height: StrictInt = Field(ge=1)
    fps: float = Field(gt=0, allow_inf_nan=False)
    frame_count: StrictInt = Field(ge=1)
    timestamps: list[float]                         # seconds, one per frame
    source: str = ""
    metadata: dict[str, Any] = {}
    channels: list[str] = list(CHANNELS)
    frame_layout: Literal["png-rgb8-channels-stacked-vertically"] = FRAME_LAYOUT
    rgb: Literal["png-rgb8"] | None = None          # RGB_LAYOUT, when the archive holds paired RGB frames
    sun: Literal["png-grey8"] | None = None         # SUN_LAYOUT, when every frame has a sun-visibility mask
    created: str = ""                               # ISO 8601 UTC
    format: Literal["alaya-gbuf"] = FORMAT_NAME
    version: StrictInt = FORMAT_VERSION

    @field_validator("channels")
    @classmethod
    def _official_order(cls, channels: list[str]) -> list[str]:
        if channels != list(CHANNELS):
            raise ValueError(f"expected {list(CHANNELS)}, got {channels}")
        return channels

    @model_validator(mode="after")
    def _one_timestamp_per_frame(self) -> "Manifest":
        if len(self.timestamps) != self.frame_count or not all(math.isfinite(t) for t in self.timestamps):
            raise field_error(f"must be {self.frame_count} finite numbers", "timestamps")
        return self

    @classmethod
    def parse(cls, raw: bytes, where: str) -> "Manifest":
        try:
            doc = json.loads(raw)
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise GBufferError(f"manifest.json is not valid JSON: {exc}", where) from None
        except RecursionError:  # json's C parser recurses per nesting level
            raise GBufferError("manifest.json is not valid JSON: nested too deeply", where) from None
        if not isinstance(doc, dict) or doc.get("format") != FORMAT_NAME:
            raise GBufferError(f"manifest.json does not describe an {FORMAT_NAME} archive", where)
        version = doc.get("version")
        if not isinstance(version, int) or version < 1:
            raise GBufferError(f"manifest.json: version must be a positive integer, got {version!r}", where)
        if version > FORMAT_VERSION:
            raise GBufferError(f"manifest.json: format version {version} is newer than this reader "
                               f"(supports up to {FORMAT_VERSION})", where)
        required = ("width", "height", "fps", "frame_count", "timestamps")
        if missing := [name for name in required if name not in doc]:   # all of them at once, not the first
            raise GBufferError(f"manifest.json: missing field(s) {', '.join(missing)}", where)
        return validate(cls, doc, lambda message, at: GBufferError(f"manifest.json: {message}", at), where)


def _to_json(value: Any, what: str, where: str) -> str:
    def plain(obj: Any) -> Any:  # numpy values and dataclasses (e.g. PlayerInput) from engines become plain JSON
        if isinstance(obj, (np.generic, np.ndarray)):
            return obj.tolist()
        if is_dataclass(obj) and not isinstance(obj, type):
            return asdict(obj)
        raise TypeError(f"{type(obj).__name__} is not JSON-serialisable")

    try:
        return json.dumps(value, default=plain, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise GBufferError(f"{what} cannot be stored as JSON: {exc}", where) from None


class GbufZipWriter(CommitOnExit):
    """Write a `.gbuf.zip` frame by frame; the size comes from the first frame.

    Use as a context manager: leaving the block normally finalises the archive, leaving it by an
    exception discards it. Memory use is one encoded frame, plus one float per frame for timestamps.
    """

    def __init__(self, path: str | Path, *, fps: float, source: str = "",
                 metadata: dict[str, Any] | None = None):
        self.path = Path(path)
        self.where = str(self.path)
        if check_fps(fps, self.where) is None:
            raise GBufferError("fps is required", self.where)
        if metadata is not None and not isinstance(metadata, dict):
            raise GBufferError(f"metadata must be a dict, got {type(metadata).__name__}", self.where)
        self.fps = float(fps)
        self.source = str(source)
        self.metadata = dict(metadata or {})
        _to_json(self.metadata, "metadata", self.where)  # fail now, not after an hour of recording
        self.frames_written = 0
        self.size: tuple[int, int] | None = None  # (H, W)
        self.paired = False                       # frames carry rgb (decided by the first frame)
        self.sunned = False                       # frames carry a sun mask (likewise)
        self._timestamps: list[float] = []
        self._target = AtomicFile(self.path)
        self._tmp = self._target.tmp
        try:
            # our own handle, so close() can cut what a failed frame left past the end record (zipfile doesn't)
            self._file = open(self._tmp, "w+b")
            self._zip: zipfile.ZipFile | None = zipfile.ZipFile(self._file, "w", zipfile.ZIP_STORED)
        except OSError as exc:
            raise GBufferError(f"cannot write here: {exc.strerror or exc}", self.where) from None

    def write(self, frame: GBufferFrame) -> None:
        archive = self._zip
        if archive is None:
            raise GBufferError("writer is closed", self.where)
        data = check_frame_array(frame.data, f"frame {frame.index}")
        if self.size is None:
            self.size = data.shape[1:3]
        check_same_size(data.shape[1:3], self.size, f"frame {frame.index}", self.where)
        timestamp = float(frame.timestamp)
        if not math.isfinite(timestamp):
            raise GBufferError(f"frame {frame.index}: timestamp {frame.timestamp!r} is not finite", self.where)
        meta = _to_json(frame.meta, f"frame {frame.index} metadata", self.where) if frame.meta else None
        i = self.frames_written
        if i == 0:
            self.paired, self.sunned = frame.rgb is not None, frame.sun is not None
        elif (frame.rgb is not None) != self.paired:   # a half-paired recording would be useless for training
            raise GBufferError(f"frame {frame.index} {'has no' if self.paired else 'has an'} rgb image but "
                               f"frame 0 {'has one' if self.paired else 'has none'}", self.where)
        elif (frame.sun is not None) != self.sunned:
            raise GBufferError(f"frame {frame.index} {'has no' if self.sunned else 'has a'} sun mask but "
                               f"frame 0 {'has one' if self.sunned else 'has none'}", self.where)
        stacked = np.ascontiguousarray(data).reshape(-1, data.shape[2], 3)
        entries: list[tuple[str, bytes | str]] = [(frame_entry(i), encode_png(stacked))]
        if self.paired:
            entries.append((rgb_entry(i), encode_png(np.ascontiguousarray(frame.rgb))))
        if self.sunned:
            entries.append((sun_entry(i), encode_png(np.ascontiguousarray(frame.sun))))
        if meta is not None:
            entries.append((frame_entry(i, "json"), meta))
        _write_frame_entries(archive, entries)
        self._timestamps.append(timestamp)
        self.frames_written += 1

    def close(self) -> None:
        """Write the manifest and move the archive into place. An empty recording is an error."""
        if self._zip is None:
            return
        if self.frames_written == 0 or self.size is None:     # (the size comes with the first frame)
            self.abort()
            raise GBufferError("no frames were written; nothing saved", self.where)
        height, width = self.size
        manifest = Manifest(width=int(width), height=int(height), fps=self.fps, frame_count=self.frames_written,
                            timestamps=self._timestamps, source=self.source, metadata=self.metadata,
                            rgb=RGB_LAYOUT if self.paired else None, sun=SUN_LAYOUT if self.sunned else None,
                            created=dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"))
        try:
            self._zip.writestr(MANIFEST_NAME, manifest.model_dump_json(indent=1, exclude_none=True))
            self._zip.close()
            self._file.truncate()           # the end record is last, even after a taken-back frame
            self._file.close()
        except BaseException:
            self.abort()
            raise
        self._zip = None
        self._target.commit()

    def abort(self) -> None:
        """Discard the partial archive; `path` is left untouched."""
        zip_, self._zip = self._zip, None
        try:
            if zip_ is not None:
                zip_.close()
        except OSError:
            pass                            # a full disk: the partial goes anyway
        finally:
            try:
                self._file.close()
            except OSError:
                pass
            self._target.discard()


def _write_frame_entries(z: zipfile.ZipFile, entries: list[tuple[str, bytes | str]]) -> None:
    """All of a frame's entries or none: when a write fails (disk full), the entries of the half-written
    frame are taken back, so `close()` (once there is room again) still writes a valid archive of the
    complete frames. The next entry, or the central directory, is written over the half-written bytes."""
    listed, end = len(z.filelist), z.start_dir
    try:
        for name, payload in entries:
            z.writestr(name, payload)
    except BaseException:
        for info in z.filelist[listed:]:
            z.NameToInfo.pop(info.filename, None)
        del z.filelist[listed:]
        z.start_dir = end
        raise


class GbufZipSource(RecordedSource):
    """Random-access reader of a `.gbuf.zip`. `fps` overrides the recorded rate (timestamps become i / fps)."""

    def __init__(self, path: str | Path, fps: float | None = None):
        self.path = Path(path)
        self.name = self.path.name
        where = str(self.path)
        fps_override = check_fps(fps, where)
        if not self.path.is_file():
            raise GBufferError("file not found", where)
        try:
            self._zip = zipfile.ZipFile(self.path, "r")
        except (zipfile.BadZipFile, OSError) as exc:
            raise GBufferError(f"not a zip archive, or truncated: {exc}", where) from None
        try:
            self._open(where, fps_override)
        except BaseException:
            self._zip.close()
            raise

    def _open(self, where: str, fps_override: float | None) -> None:
        names = set(self._zip.namelist())
        if MANIFEST_NAME not in names:
            raise GBufferError("no manifest.json: the recording was not finished (interrupted?)", where)
        try:
            raw = read_member(self._zip, MANIFEST_NAME, MAX_MANIFEST_BYTES, where)
        except (zipfile.BadZipFile, OSError, EOFError) as exc:
            raise GBufferError(f"manifest.json is corrupt: {exc}", where) from None
        self.manifest = Manifest.parse(raw, where)
        if self.manifest.width * self.manifest.height > MAX_PIXELS:
            raise GBufferError(f"manifest.json: {self.manifest.width}x{self.manifest.height} is larger than this "
                               f"reader accepts (3840x2160 pixels)", where)
        frames = sorted(int(m.group(1)) for n in names if (m := _FRAME_ENTRY.fullmatch(n)))
        if frames != list(range(self.manifest.frame_count)):
            raise GBufferError(f"manifest.json says {self.manifest.frame_count} frames but the archive holds "
                               f"{len(frames)} frame images" + ("" if len(frames) != self.manifest.frame_count
                                                               else " with gaps in their numbering"), where)
        self._meta_entries = {n for n in names if n.startswith("frames/") and n.endswith(".json")}
        if self.manifest.rgb is not None:
            rgb = {int(m.group(1)) for n in names if (m := _RGB_ENTRY.fullmatch(n))}
            if lacking := [i for i in range(self.manifest.frame_count) if i not in rgb]:
                raise GBufferError(f"frame {lacking[0]} has no rgb image ({len(lacking)} of "
                                   f"{self.manifest.frame_count} frames lack one)", where)
        if self.manifest.sun is not None:
            sun = {int(m.group(1)) for n in names if (m := _SUN_ENTRY.fullmatch(n))}
            if lacking := [i for i in range(self.manifest.frame_count) if i not in sun]:
                raise GBufferError(f"frame {lacking[0]} has no sun mask ({len(lacking)} of "
                                   f"{self.manifest.frame_count} frames lack one)", where)
        self.width, self.height = self.manifest.width, self.manifest.height
        self.fps = fps_override or float(self.manifest.fps)
        self._retimed = fps_override is not None

    @property
    def source(self) -> str:
        return self.manifest.source

    @property
    def metadata(self) -> dict[str, Any]:
        return self.manifest.metadata

    def __len__(self) -> int:
        return self.manifest.frame_count

    def _entry(self, name: str, index: int, limit: int) -> bytes:
        try:
            return read_member(self._zip, name, limit, f"{self.path}: frame {index}")
        except (zipfile.BadZipFile, OSError, EOFError) as exc:
            raise GBufferError(f"frame {index} is corrupt: {exc}", str(self.path)) from None

    def _png(self, name: str, index: int, size: tuple[int, int], what: str, part: str = "") -> np.ndarray:
        """A frame's PNG member: its bytes bounded by the raw size of `size` (width, height) in 16-bit RGB plus
        room for PNG's own overhead, and the size its header declares checked before a pixel is decoded."""
        data = self._entry(name, index, size[0] * size[1] * 6 + 2**20)
        where = f"{self.path}: frame {index}"
        declared = png_size(data)
        if declared is not None and declared != size:
            raise GBufferError(f"{what} is {declared[0]}x{declared[1]}, expected {size[0]}x{size[1]}", where)
        return decode_png(data, where + part)

    def read(self, index: int) -> GBufferFrame:
        where = f"{self.path}: frame {index}"
        stacked = self._png(frame_entry(index), index, (self.width, NUM_CHANNELS * self.height), "image")
        meta: dict[str, Any] = {}
        if (name := frame_entry(index, "json")) in self._meta_entries:
            try:
                meta = json.loads(self._entry(name, index, MAX_META_BYTES))
            except (UnicodeDecodeError, json.JSONDecodeError) as exc:
                raise GBufferError(f"metadata is not valid JSON: {exc}", where) from None
            except RecursionError:
                raise GBufferError("metadata is not valid JSON: nested too deeply", where) from None
        rgb = None
        if self.paired:
            rgb = self._png(rgb_entry(index), index, (self.width, self.height), "rgb image", " rgb")
        sun = None
        if self.has_sun:
            sun = self._png(sun_entry(index), index, (self.width, self.height), "sun mask", " sun")[..., 0].copy()
        timestamp = index / self.fps if self._retimed else float(self.manifest.timestamps[index])
        return GBufferFrame(index, timestamp, stacked.reshape(NUM_CHANNELS, self.height, self.width, 3), meta, rgb,
                            sun)

    @property
    def paired(self) -> bool:
        """Every frame carries its paired RGB image."""
        return self.manifest.rgb is not None

    @property
    def has_sun(self) -> bool:
        """Every frame carries its sun-visibility mask (`frame.sun`)."""
        return self.manifest.sun is not None

    def close(self) -> None:
        self._zip.close()


def read_member(archive: zipfile.ZipFile, name: str, limit: int, where: str) -> bytes:
    """One member's bytes, refused before inflating when its declared size is over `limit` or over MAX_RATIO
    times its compressed size, and read in pieces. zipfile stops inflating at the declared size and checks the
    CRC there, so a header that lies about the size cannot make it allocate more than `limit`."""
    info = archive.getinfo(name)
    if info.file_size > limit:
        raise GBufferError(f"{name} inflates to {info.file_size} bytes, more than the {limit} it may hold", where)
    if info.file_size > max(info.compress_size * MAX_RATIO, MIN_RATIO_ALLOWANCE):
        raise GBufferError(f"{name} is compressed {info.file_size // max(info.compress_size, 1)}:1, more than "
                           f"{MAX_RATIO}:1 (a zip bomb?)", where)
    pieces = []
    with archive.open(info) as member:
        while piece := member.read(READ_PIECE):
            pieces.append(piece)
    return b"".join(pieces)
