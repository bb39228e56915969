"""AlayaRenderer clip folders: one video per channel (`albedo.mp4` ... or `{clip}_albedo.mp4` ...), via PyAV.

A paired clip also holds `rgb.mp4` (or `{clip}_rgb.mp4`): the RGB ground truth, frame for frame.

Sequential reads decode forward without seeking; a random read seeks to the keyframe at or before the
frame and decodes forward from there. The last few assembled frames are cached for stepping back.
"""

from __future__ import annotations

import bisect
import re
import threading
from collections import OrderedDict
from fractions import Fraction
from pathlib import Path
from typing import Iterable, Iterator

import av
import numpy as np

from gbuffer.formats.common import DEFAULT_FPS, check_fps, check_same_size
from gbuffer.formats.pictures import rgb24
from gbuffer.frame import CHANNELS, GBufferError, GBufferFrame
from gbuffer.size import H264_RULE, Size, SizeError
from gbuffer.source import RecordedSource

CLIP_SUFFIX = ".mp4"
_CLIP_FILE = re.compile(rf"(?:(?P<clip>.+)_)?(?P<channel>{'|'.join(CHANNELS)})", re.IGNORECASE)
CACHE_FRAMES = 8
RGB_STREAM = "rgb"


def clip_channel(path: Path) -> tuple[str, str] | None:
    """`x/clip_depth.mp4` → ("clip", "depth"); `x/depth.mp4` → ("", "depth"); anything else → None."""
    if path.suffix.lower() != CLIP_SUFFIX:
        return None
    m = _CLIP_FILE.fullmatch(path.stem)
    return (m.group("clip") or "", m.group("channel").lower()) if m else None


def find_clip_files(path: Path) -> tuple[str, dict[str, Path]]:
    """Resolve a clip folder, or one channel file of a clip, to (clip name, {channel: file}).

    A folder holding several clips is ambiguous: name one of its files instead.
    """
    if path.is_file():
        found = clip_channel(path)
        if found is None:
            raise GBufferError(f"not a clip channel file; expected <channel>{CLIP_SUFFIX} or "
                               f"<clip>_<channel>{CLIP_SUFFIX} with channel one of {', '.join(CHANNELS)}",
                               str(path))
        clip, folder = found[0], path.parent
    else:
        folder = path
        clips = sorted({found[0] for p in folder.iterdir() if (found := clip_channel(p))})
        if not clips:
            raise GBufferError(f"no clip channel files ({', '.join(c + CLIP_SUFFIX for c in CHANNELS)})",
                               str(folder))
        if len(clips) > 1:
            names = ", ".join(c or "(unprefixed)" for c in clips)
            raise GBufferError(f"holds several clips ({names}); pass one of their channel files instead",
                               str(folder))
        clip = clips[0]
    files = {}
    for p in folder.iterdir():
        if (found := clip_channel(p)) and found[0] == clip:
            files[found[1]] = p
    missing = [c for c in CHANNELS if c not in files]
    if missing:
        prefix = f"{clip}_" if clip else ""
        raise GBufferError(f"missing channel file(s) {', '.join(prefix + c + CLIP_SUFFIX for c in missing)}",
                           str(folder))
    return clip, {c: files[c] for c in CHANNELS}


def _video_error(path: Path, exc: Exception, what: str = "not a readable video") -> GBufferError:
    # FFmpegError.strerror is the reason without the file name, which the message already leads with.
    reason = getattr(exc, "strerror", None) or (str(exc).splitlines() or [repr(exc)])[0]
    return GBufferError(f"{what} (truncated or corrupt?): {reason}", str(path))


class ChannelVideo:
    """One channel's video with frame-accurate access by index. pts[i] is frame i's presentation time."""

    def __init__(self, path: Path):
        self.path = path
        try:
            # a corrupt file's metadata may not be UTF-8; it is not ours to read, so it must not stop the open
            self.container = av.open(str(path), metadata_errors="replace")
        except (av.FFmpegError, OSError) as exc:
            raise _video_error(path, exc) from None
        try:
            if not self.container.streams.video:
                raise GBufferError("has no video stream", str(path))
            self.stream = self.container.streams.video[0]
            if self.stream.codec_context is None:  # e.g. a truncated file whose codec parameters are cut off
                raise GBufferError("has no decodable video stream (truncated or corrupt?)", str(path))
            self.stream.thread_type = "AUTO"
            self.height, self.width = self.stream.codec_context.height, self.stream.codec_context.width
            rate = self.stream.average_rate or self.stream.guessed_rate
            self.fps = float(rate) if rate else None
            self._index_packets()
        except BaseException:
            self.container.close()
            raise
        self._decoded: Iterator[av.VideoFrame] | None = None
        self._next = 0  # index the decoder yields next, when _decoded is not None
        self.seeks = 0  # how often frame() had to seek; play order needs one

    def _index_packets(self) -> None:
        """Demux (no decoding) to learn every frame's pts and which frames are keyframes."""
        pts, keys = [], []
        try:
            for packet in self.container.demux(self.stream):
                if packet.size == 0:
                    continue  # the demuxer's end-of-stream marker
                if packet.pts is None:
                    raise GBufferError("has packets without timestamps; remux it to MP4", str(self.path))
                pts.append(packet.pts)
                if packet.is_keyframe:
                    keys.append(packet.pts)
            self.container.seek(0)  # a truncated file can fail here too (EPERM from FFmpeg's mov demuxer)
        except av.FFmpegError as exc:
            raise _video_error(self.path, exc) from None
        self.pts = sorted(pts)  # display order
        self.index_of = {p: i for i, p in enumerate(self.pts)}
        self.keyframes = sorted(self.index_of[p] for p in keys)

    def __len__(self) -> int:
        return len(self.pts)

    def frame(self, index: int) -> np.ndarray:
        """Frame `index` as uint8 (H, W, 3)."""
        k = bisect.bisect_right(self.keyframes, index) - 1
        keyframe = self.keyframes[k] if k >= 0 else 0
        if self._decoded is None or not keyframe <= self._next <= index:
            # Decoding forward from where we are would not reach `index` cheaper than from its keyframe.
            try:
                self.container.seek(self.pts[keyframe], stream=self.stream, backward=True)
            except av.FFmpegError as exc:
                raise _video_error(self.path, exc, f"frame {index} cannot be reached") from None
            self.seeks += 1
            self._decoded = self.container.decode(self.stream)
            self._next = -1  # unknown until the first frame arrives
        try:
            for decoded in self._decoded:
                at = self._next if decoded.pts is None else self.index_of.get(decoded.pts, self._next)
                self._next = at + 1
                if at == index:
                    return rgb24(decoded)
                if at > index:
                    break
        except av.FFmpegError as exc:
            self._decoded = None
            raise _video_error(self.path, exc, f"frame {index} cannot be decoded") from None
        self._decoded = None
        raise GBufferError(f"frame {index} cannot be decoded (truncated or corrupt?)", str(self.path))

    def close(self) -> None:
        self.container.close()


class ClipFolderSource(RecordedSource):
    """Five channel videos of one clip, read together as G-buffer frames."""

    def __init__(self, path: str | Path, fps: float | None = None):
        path = Path(path)
        if not path.exists():
            raise GBufferError("file or folder not found", str(path))
        fps = check_fps(fps, str(path))
        clip, files = find_clip_files(path)
        self.name = clip or (path.name if path.is_dir() else path.parent.name)
        self.videos: dict[str, ChannelVideo] = {}
        try:
            for channel, file in files.items():
                self.videos[channel] = ChannelVideo(file)
            self._check_agree()
        except BaseException:
            self.close()
            raise
        first = self.videos[CHANNELS[0]]
        self.height, self.width = first.height, first.width
        rgb_file = files[CHANNELS[0]].with_name(f"{clip + '_' if clip else ''}{RGB_STREAM}{CLIP_SUFFIX}")
        self.rgb_video: ChannelVideo | None = None
        if rgb_file.is_file():
            try:
                self.rgb_video = ChannelVideo(rgb_file)
                self._check_rgb()
            except BaseException:
                self.close()
                raise
        self.fps = fps or first.fps or DEFAULT_FPS
        self._cache: OrderedDict[int, tuple] = OrderedDict()  # index → ((5, H, W, 3), rgb or None), newest last
        self._lock = threading.Lock()

    def _check_agree(self) -> None:
        videos = list(self.videos.values())
        counts = {len(v) for v in videos}
        if len(counts) > 1:
            listing = ", ".join(f"{v.path.name} {len(v)}" for v in videos)
            raise GBufferError(f"channel files have different frame counts: {listing}", str(videos[0].path.parent))
        if counts == {0}:
            raise GBufferError("clip has no frames", str(videos[0].path.parent))
        sizes = {(v.width, v.height) for v in videos}
        if len(sizes) > 1:
            listing = ", ".join(f"{v.path.name} {v.width}x{v.height}" for v in videos)
            raise GBufferError(f"channel files have different sizes: {listing}", str(videos[0].path.parent))

    def _check_rgb(self) -> None:
        rgb, n = self.rgb_video, len(self.videos[CHANNELS[0]])
        assert rgb is not None                # called just after the rgb video opened
        if (rgb.width, rgb.height) != (self.width, self.height):
            raise GBufferError(f"rgb video is {rgb.width}x{rgb.height} but the channels are "
                               f"{self.width}x{self.height}", str(rgb.path))
        if len(rgb) < n:
            raise GBufferError(f"frame {len(rgb)} has no rgb image: the rgb video has {len(rgb)} frames, "
                               f"the channels {n}", str(rgb.path))

    @property
    def paired(self) -> bool:
        return self.rgb_video is not None

    def __len__(self) -> int:
        return len(self.videos[CHANNELS[0]])

    def read(self, index: int) -> GBufferFrame:
        with self._lock:  # the decoders are stateful: one reader at a time (e.g. renderer and UI preview)
            cached = self._cache.get(index)
            if cached is None:
                data = np.stack([self.videos[c].frame(index) for c in CHANNELS])
                rgb = self.rgb_video.frame(index) if self.rgb_video is not None else None
                self._cache[index] = cached = (data, rgb)
                if len(self._cache) > CACHE_FRAMES:
                    self._cache.popitem(last=False)
            else:
                self._cache.move_to_end(index)
        data, rgb = cached
        return GBufferFrame(index, index / self.fps, data.copy(), rgb=None if rgb is None else rgb.copy())

    def close(self) -> None:
        for video in self.videos.values():
            video.close()
        self.videos = {}
        rgb_video = getattr(self, "rgb_video", None)     # absent when __init__ failed before it
        if rgb_video is not None:
            rgb_video.close()
            self.rgb_video = None


def write_clip_folder(frames: Iterable[GBufferFrame], out_dir: str | Path, fps: float, *, clip: str = "",
                      lossless: bool = True, gop: int = 30) -> dict[str, Path]:
    """Write a clip folder, one MP4 per channel, streaming frame by frame.

    lossless=True: H.264 in RGB (libx264rgb, crf 0): frames read back bit-exact.
    lossless=False: ordinary H.264 yuv420p crf 18, like the official clips (needs even width and height).
    `gop` is the keyframe interval in frames. Frames with rgb (all or none) also get `rgb.mp4`.
    Returns {stream: path}.
    """
    out_dir = Path(out_dir)
    where = str(out_dir)
    rate = Fraction(check_fps(fps, where) or DEFAULT_FPS).limit_denominator(1001)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = {c: out_dir / f"{clip + '_' if clip else ''}{c}{CLIP_SUFFIX}" for c in (*CHANNELS, RGB_STREAM)}
    containers, streams = {}, {}
    size: tuple[int, int] | None = None
    paired = False
    try:
        for frame in frames:
            if size is None:
                size = frame.data.shape[1:3]
                paired = frame.rgb is not None
                if not paired:
                    del paths[RGB_STREAM]
                if not lossless:
                    try:
                        Size(size[1], size[0]).require_multiple(2, H264_RULE)
                    except SizeError as exc:
                        raise GBufferError(exc.detail, where) from None
                for c, p in paths.items():
                    containers[c] = av.open(str(p), "w")
                    s = containers[c].add_stream("libx264rgb" if lossless else "libx264", rate=rate)
                    s.height, s.width = size
                    s.pix_fmt = "rgb24" if lossless else "yuv420p"
                    s.options = {"crf": "0" if lossless else "18", "preset": "ultrafast", "g": str(gop)}
                    streams[c] = s
            check_same_size(frame.data.shape[1:3], size, f"frame {frame.index}", where)
            if (frame.rgb is not None) != paired:
                raise GBufferError(f"frame {frame.index}: either every frame has an rgb image or none does", where)
            images = [*frame.data, frame.rgb] if paired else frame.data
            for c, image in zip(paths, images):
                picture = av.VideoFrame.from_ndarray(np.ascontiguousarray(image), format="rgb24")
                containers[c].mux(streams[c].encode(picture))
        if size is None:
            raise GBufferError("no frames to write", where)
        for c in paths:
            containers[c].mux(streams[c].encode(None))
    finally:
        for container in containers.values():
            container.close()
    return paths
