"""The one in-memory G-buffer frame, identical to one frame of the official sample layout.

This module is the only place that knows the channel order.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from alaya_errors import UserError

# Official AlayaRenderer channel order; `window-NN.npy` is (T, 5, H, W, 3) in exactly this order.
CHANNELS: tuple[str, ...] = ("albedo", "depth", "metallic", "normal", "roughness")
NUM_CHANNELS = len(CHANNELS)
CHANNEL_INDEX = {name: i for i, name in enumerate(CHANNELS)}


class GBufferError(UserError):
    """A G-buffer file, frame or feed message that cannot be used."""


def check_frame_array(data: Any, where: str = "frame") -> np.ndarray:
    """Validate one frame array `uint8 (5, H, W, 3)`; return it unchanged or raise GBufferError."""
    if not isinstance(data, np.ndarray):
        raise GBufferError(f"expected a numpy array, got {type(data).__name__}", where)
    if data.dtype != np.uint8:
        raise GBufferError(f"dtype is {data.dtype}, expected uint8", where)
    if data.ndim != 4 or data.shape[0] != NUM_CHANNELS or data.shape[3] != 3:
        raise GBufferError(f"shape is {tuple(data.shape)}, expected (5, H, W, 3) "
                           f"with channels {', '.join(CHANNELS)}", where)
    if data.shape[1] < 1 or data.shape[2] < 1:
        raise GBufferError(f"empty image of shape {tuple(data.shape)}", where)
    return data


def check_rgb_array(rgb: Any, size: tuple[int, int], where: str = "frame") -> np.ndarray:
    """Validate a frame's paired RGB image `uint8 (H, W, 3)` at the G-buffer's (H, W); raise GBufferError."""
    if not isinstance(rgb, np.ndarray) or rgb.dtype != np.uint8:
        got = rgb.dtype if isinstance(rgb, np.ndarray) else type(rgb).__name__
        raise GBufferError(f"rgb must be a uint8 array, got {got}", where)
    if rgb.shape != (*size, 3):
        raise GBufferError(f"rgb shape is {tuple(rgb.shape)}, expected ({size[0]}, {size[1]}, 3) "
                           f"(the G-buffer's size)", where)
    return rgb


def check_sun_array(sun: Any, size: tuple[int, int], where: str = "frame") -> np.ndarray:
    """Validate a frame's sun-visibility mask `uint8 (H, W)` at the G-buffer's (H, W); raise GBufferError."""
    if not isinstance(sun, np.ndarray) or sun.dtype != np.uint8:
        got = sun.dtype if isinstance(sun, np.ndarray) else type(sun).__name__
        raise GBufferError(f"sun mask must be a uint8 array, got {got}", where)
    if sun.shape != tuple(size):
        raise GBufferError(f"sun mask shape is {tuple(sun.shape)}, expected ({size[0]}, {size[1]}) "
                           f"(the G-buffer's size)", where)
    return sun


@dataclass
class GBufferFrame:
    """One G-buffer frame: `data` is uint8 (5, H, W, 3) in `CHANNELS` order; timestamp in seconds.

    `rgb` is the optional paired ground truth, uint8 (H, W, 3): the engine's own lit image of the same frame
    (what a renderer learns to produce). Sources fill it only when the recording or feed carries one.

    `sun` is the optional sun visibility of that lit image, uint8 (H, W): 255 where the sun reaches the
    surface (and sky), 0 in shadow or on a face turned away from the sun, between at a shadow's soft edge. It
    comes from the shadow map the beauty pass draws, so eval can score shadowed and lit pixels apart."""

    index: int
    timestamp: float
    data: np.ndarray
    meta: dict[str, Any] = field(default_factory=dict)
    rgb: np.ndarray | None = None
    sun: np.ndarray | None = None

    def __post_init__(self) -> None:
        check_frame_array(self.data, f"frame {self.index}")
        if self.rgb is not None:
            check_rgb_array(self.rgb, self.data.shape[1:3], f"frame {self.index}")
        if self.sun is not None:
            check_sun_array(self.sun, self.data.shape[1:3], f"frame {self.index}")

    @property
    def height(self) -> int:
        return int(self.data.shape[1])

    @property
    def width(self) -> int:
        return int(self.data.shape[2])

    def channel(self, name: str) -> np.ndarray:
        """The (H, W, 3) uint8 image of one channel, by name."""
        try:
            return self.data[CHANNEL_INDEX[name]]
        except KeyError:
            raise GBufferError(f"unknown channel {name!r}; channels are {', '.join(CHANNELS)}") from None

    @classmethod
    def from_channels(cls, index: int, timestamp: float, channels: dict[str, np.ndarray],
                      meta: dict[str, Any] | None = None) -> "GBufferFrame":
        """Build a frame from a {channel name: (H, W, 3) uint8} mapping; every channel required."""
        missing = [c for c in CHANNELS if c not in channels]
        if missing:
            raise GBufferError(f"missing channel(s) {', '.join(missing)}", f"frame {index}")
        data = np.stack([np.asarray(channels[c]) for c in CHANNELS])
        return cls(index, timestamp, data, dict(meta or {}))
