"""What every G-buffer source offers: an iterator of GBufferFrame.

Recorded sources know their length and can seek; live sources also take player input.
"""

from __future__ import annotations

import abc
from typing import Iterator

from gbuffer.frame import GBufferError, GBufferFrame
from gbuffer.input import PlayerInput


class Source(abc.ABC):
    """An iterator of frames with a fixed size and frame rate."""

    width: int
    height: int
    fps: float
    name: str = "source"

    @abc.abstractmethod
    def __iter__(self) -> Iterator[GBufferFrame]: ...

    def close(self) -> None:
        """Release files or GL contexts; safe to call twice."""

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class RecordedSource(Source):
    """A finite sequence with random access. Subclasses implement `__len__` and `read(i)`.

    Iteration starts at the current position (see `seek`) and advances it, so a player can
    pause, seek and resume on the same object.
    """

    position: int = 0

    @abc.abstractmethod
    def __len__(self) -> int: ...

    @abc.abstractmethod
    def read(self, index: int) -> GBufferFrame:
        """Frame `index` (0-based, already bounds-checked by `__getitem__`)."""

    def __getitem__(self, index: int) -> GBufferFrame:
        n = len(self)
        if index < 0:
            index += n
        if not 0 <= index < n:
            raise GBufferError(f"frame {index} is out of range; the sequence has {n} frames", self.name)
        return self.read(index)

    def seek(self, index: int) -> None:
        n = len(self)
        if not 0 <= index <= n:
            raise GBufferError(f"cannot seek to frame {index}; the sequence has {n} frames", self.name)
        self.position = index

    def __iter__(self) -> Iterator[GBufferFrame]:
        while self.position < len(self):
            frame = self[self.position]
            self.position += 1
            yield frame


class LiveSource(Source):
    """An unbounded source driven by player input (built-in engine, external engine feed)."""

    @abc.abstractmethod
    def apply_input(self, player_input: PlayerInput) -> None:
        """Take effect at the next tick."""

    def frame_ready(self, timeout: float) -> bool:
        """Blocking up to `timeout` s: would the next read return at once? A source paced by an engine (a feed)
        waits here for the engine's next frame, so its reader can do other work meanwhile; others always are."""
        return True

    def interrupt(self) -> None:
        """From another thread: the reader is stopping; a read waiting for the next frame (an engine feed that
        went quiet) ends now instead of at its timeout. The source is closed afterwards, as usual."""
