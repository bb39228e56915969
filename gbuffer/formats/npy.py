"""Official sample windows: `.npy` files of uint8 (T, 5, H, W, 3), played one after another.

Windows are memory-mapped; a frame is copied out only when it is read, so a 600-frame 832x448 sequence
(3.3 GB) costs one frame of memory at a time.

Paired recordings add a sibling per window, `window-NN.rgb.npy`: uint8 (T, H, W, 3), the RGB ground truth of
the window's T frames (docs/formats.md). Either every window has one or none does.
"""

from __future__ import annotations

import bisect
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np

from gbuffer.formats.common import DEFAULT_FPS, atomic_path, check_fps, check_same_size
from gbuffer.frame import NUM_CHANNELS, GBufferError, GBufferFrame
from gbuffer.source import RecordedSource

NPY_MAGIC = b"\x93NUMPY"
EXPECTED = f"a uint8 array (T, {NUM_CHANNELS}, H, W, 3)"

RGB_SUFFIX = ".rgb.npy"


def rgb_sibling(window: Path) -> Path:
    """window-00.npy → window-00.rgb.npy"""
    return window.with_name(window.name[: -len(".npy")] + RGB_SUFFIX)


def is_rgb_sibling(path: Path) -> bool:
    return path.name.lower().endswith(RGB_SUFFIX)


def _open_npy(path: Path) -> np.ndarray:
    where = str(path)
    if not path.is_file():
        raise GBufferError("file not found", where)
    with open(path, "rb") as f:
        magic = f.read(len(NPY_MAGIC))
    # Without the .npy magic numpy treats the bytes as a pickle and its error advises loading them unsafely:
    # say what the file is not instead, and never pass that advice on.
    if magic != NPY_MAGIC and magic[:2] != b"PK":
        raise GBufferError(f"not a G-buffer window (expected {EXPECTED})", where)
    try:
        array = np.load(path, mmap_mode="r", allow_pickle=False)
    except Exception as exc:  # noqa: BLE001 - a corrupt header raises whatever numpy's ast/tokenize parse raises
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        if "pickle" in reason:
            reason = f"expected {EXPECTED}"
        raise GBufferError(f"not a readable .npy file (truncated or corrupt?): {reason}", where) from None
    if not isinstance(array, np.ndarray):
        raise GBufferError("is an .npz archive, expected a single .npy array", where)
    if array.dtype != np.uint8:
        raise GBufferError(f"dtype is {array.dtype}, expected uint8", where)
    return array


def load_rgb_window(path: Path, window: np.ndarray, first_frame: int) -> np.ndarray:
    """Memory-map a window's RGB sibling and check it pairs with the window frame by frame."""
    rgb = _open_npy(path)
    t, _, h, w, _ = window.shape
    if rgb.ndim != 4 or rgb.shape[3] != 3 or rgb.shape[1:3] != (h, w):
        raise GBufferError(f"shape is {tuple(rgb.shape)}, expected (T, {h}, {w}, 3) like its window", str(path))
    if rgb.shape[0] < t:
        raise GBufferError(f"frame {first_frame + rgb.shape[0]} has no rgb image: {rgb.shape[0]} rgb frames "
                           f"for a window of {t}", str(path))
    if rgb.shape[0] > t:
        raise GBufferError(f"{rgb.shape[0]} rgb frames for a window of {t}: which frames they pair with is "
                           f"unknown", str(path))
    return rgb


def load_window(path: Path) -> np.ndarray:
    """Memory-map one window and check it is uint8 (T, 5, H, W, 3) with T >= 1."""
    where = str(path)
    window = _open_npy(path)
    if window.ndim != 5 or window.shape[1] != NUM_CHANNELS or window.shape[4] != 3:
        raise GBufferError(f"shape is {tuple(window.shape)}, expected (T, {NUM_CHANNELS}, H, W, 3)", where)
    if window.shape[0] == 0:
        raise GBufferError("window has no frames", where)
    return window


class NpyWindowsSource(RecordedSource):
    """One sequence from one or more `.npy` windows in the given order; all windows share H and W."""

    def __init__(self, names: Sequence[str | Path], fps: float | None = None):
        paths = [Path(p) for p in names]
        if not paths:
            raise GBufferError("no .npy windows given")
        self.name = paths[0].name if len(paths) == 1 else f"{paths[0].name} (+{len(paths) - 1} windows)"
        self.fps = check_fps(fps, self.name) or DEFAULT_FPS
        self.paths = paths
        self.windows = [load_window(p) for p in paths]          # memory maps (np.load's mmap_mode)
        self.height, self.width = self.windows[0].shape[2:4]
        for path, window in zip(paths[1:], self.windows[1:]):
            check_same_size(window.shape[2:4], (self.height, self.width), "window", str(path))
        # starts[k] = sequence index of the first frame of window k
        self.starts = np.cumsum([0] + [w.shape[0] for w in self.windows]).tolist()
        siblings = [rgb_sibling(p) for p in paths]
        self.rgb: list[np.ndarray] | None = None
        if any(s.is_file() for s in siblings):
            lacking = next((k for k, s in enumerate(siblings) if not s.is_file()), None)
            if lacking is not None:
                raise GBufferError(f"frame {self.starts[lacking]} has no rgb image: {siblings[lacking].name} is "
                                   f"missing while other windows have theirs", str(paths[lacking]))
            self.rgb = [load_rgb_window(s, w, start) for s, w, start in zip(siblings, self.windows, self.starts)]

    @property
    def paired(self) -> bool:
        return self.rgb is not None

    def __len__(self) -> int:
        return self.starts[-1]

    def read(self, index: int) -> GBufferFrame:
        k = bisect.bisect_right(self.starts, index) - 1
        data = np.array(self.windows[k][index - self.starts[k]])  # copy one frame out of the map
        rgb = np.array(self.rgb[k][index - self.starts[k]]) if self.rgb is not None else None
        return GBufferFrame(index, index / self.fps, data, {"file": self.paths[k].name}, rgb)

    def close(self) -> None:
        # Dropping the maps lets numpy close the files once no frame view refers to them.
        self.windows = []
        self.rgb = None if self.rgb is None else []


def write_npy_windows(frames: Iterable[GBufferFrame], out_dir: str | Path, window: int = 16,
                      prefix: str = "window-") -> list[Path]:
    """Write frames as official windows `{prefix}00.npy`, `{prefix}01.npy`, ... of `window` frames each.

    The last window holds whatever is left (it may be shorter). Holds one window in memory at a time.
    Frames that carry rgb (all or none) also get `{prefix}NN.rgb.npy` siblings. Returns the window paths in order.
    """
    if int(window) != window or window < 1:
        raise GBufferError(f"window must be a positive whole number of frames, got {window!r}")
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    buffer: np.ndarray | None = None  # (window, 5, H, W, 3)
    rgb: np.ndarray | None = None     # (window, H, W, 3) for paired frames
    filled = 0

    def flush() -> None:
        assert buffer is not None         # called once a frame has come, which made the buffer
        path = out_dir / f"{prefix}{len(written):02d}.npy"
        if rgb is not None:
            with atomic_path(rgb_sibling(path)) as tmp, open(tmp, "wb") as f:
                np.save(f, rgb[:filled])
        with atomic_path(path) as tmp, open(tmp, "wb") as f:
            np.save(f, buffer[:filled])
        written.append(path)

    for frame in frames:
        if buffer is None:
            buffer = np.empty((window, *frame.data.shape), np.uint8)
            if frame.rgb is not None:
                rgb = np.empty((window, *frame.rgb.shape), np.uint8)
        check_same_size(frame.data.shape[1:3], buffer.shape[2:4], f"frame {frame.index}", str(out_dir))
        if (frame.rgb is not None) != (rgb is not None):
            raise GBufferError(f"frame {frame.index}: either every frame has an rgb image or none does", str(out_dir))
        buffer[filled] = frame.data
        if rgb is not None:
            rgb[filled] = frame.rgb
        filled += 1
        if filled == window:
            flush()
            filled = 0
    if buffer is None:
        raise GBufferError("no frames to write", str(out_dir))
    if filled:
        flush()
    return written
