"""`--receive`: the report's loop in an engine we did not write. The studio styles each frame Panda3D sends and
sends it back (feed protocol 2, docs/feed.md); this shows the newest in a window of the engine's own and keeps
the round-trip figures for the last line of JSON."""

from __future__ import annotations

import threading

import numpy as np

from gbuffer.feed.client import FeedClient
from gbuffer.panda3d.display import Panda3DUnavailableError
from gbuffer.panda3d.window import FrameWindow

TITLE = "alaya-studio: styled"


def styled_window(width: int, height: int) -> FrameWindow:
    """On screen where there is a display; else offscreen (tests, servers), which draws the same."""
    try:
        return FrameWindow(width, height, TITLE, flag="--receive")
    except Panda3DUnavailableError:
        return FrameWindow(width, height, TITLE, offscreen=True, flag="--receive")


class StyledFrames:
    """Reads the styled frames on a thread of its own (decoding JPEG there); the engine's thread shows the
    newest with its next frame (Panda3D draws on that thread only)."""

    def __init__(self, client: FeedClient, window: FrameWindow):
        self.client, self.window = client, window
        self.shown = 0
        self._newest: np.ndarray | None = None
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._read, name="styled-frames", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _read(self) -> None:
        for styled in self.client.frames():
            rgb = styled.rgb()
            with self._lock:
                self._newest = rgb

    def show_newest(self) -> None:
        with self._lock:
            rgb, self._newest = self._newest, None
        if rgb is not None:
            if rgb.shape[:2] != (self.window.height, self.window.width):
                raise Panda3DUnavailableError(f"the studio sent {rgb.shape[1]}x{rgb.shape[0]} frames for a "
                                              f"{self.window.width}x{self.window.height} window", "--receive")
            self.window.show(rgb)
            self.shown += 1

    def finish(self, last_index: int, timeout_s: float = 10.0) -> None:
        """After the last frame is sent: until its styled frame is back (latest frame wins, so it comes)."""
        self.client.roundtrips.wait_for(last_index, timeout_s)

    def report(self, sent: int) -> dict:
        return {"frames_sent": sent, **self.client.roundtrips.summary(), "frames_shown": self.shown}
