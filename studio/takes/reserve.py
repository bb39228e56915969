"""Room kept back on a take's disk, so a take that meets a full disk can still be finished.

A take ends with writes of its own: the archive's central directory and manifest, the MP4's last fragment,
take.json and schedule.json. If the disk is full by then, the take would be lost. So the recorder holds a
reserve file, allocated for real (not sparse) and grown with the take; when a write fails for lack of space,
the reserve is released and the closing writes use its room. The recorder also stops on its own, cleanly, when
the disk's free space falls below a margin, so the disk is rarely full at all (other programs need it too).
"""

from __future__ import annotations

import errno
import os
import shutil
from pathlib import Path

RESERVE_NAME = ".reserve"
BASE_BYTES = 1 << 20          # manifest, take.json, schedule.json and the MP4's trailer
PER_FRAME_BYTES = 256         # per frame: a few zip directory entries, a manifest timestamp, a schedule entry
GROW_FRAMES = 300             # grown in steps of this many frames (one allocation every ~10 s at 30 fps)


class DiskReserve:
    def __init__(self, folder: Path, min_free_bytes: int):
        self.path = Path(folder) / RESERVE_NAME
        self.min_free_bytes = min_free_bytes
        self.size = 0
        self._fd: int | None = os.open(self.path, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o600)
        try:
            self._grow_to(self._fd, BASE_BYTES)
        except OSError:
            self.release()
            raise

    def check(self, frames: int) -> str | None:
        """Between frames: grow the reserve with the take; → why the take must stop now, or None."""
        fd = self._fd
        if fd is None:
            return None
        wanted = BASE_BYTES + PER_FRAME_BYTES * GROW_FRAMES * (frames // GROW_FRAMES + 1)
        try:
            if wanted > self.size:
                self._grow_to(fd, wanted)
            free = shutil.disk_usage(self.path.parent).free
        except OSError as exc:
            return f"the disk is full ({exc.strerror or exc})"
        if free < self.min_free_bytes:
            return f"the disk is almost full ({free / 2**20:.0f} MB left)"
        return None

    def release(self) -> None:
        """Give the room back (before the closing writes, and at the end of every take)."""
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)
        self.path.unlink(missing_ok=True)

    def _grow_to(self, fd: int, size: int) -> None:
        try:
            os.posix_fallocate(fd, 0, size)
        except OSError as exc:
            if exc.errno not in (errno.EOPNOTSUPP, errno.EINVAL):
                raise
            # a filesystem without fallocate: write the bytes (ftruncate alone would be sparse, no reserve)
            os.lseek(fd, self.size, os.SEEK_SET)
            zeros = memoryview(bytes(size - self.size))
            while zeros:
                zeros = zeros[os.write(fd, zeros):]
        self.size = size
