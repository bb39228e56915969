"""Picture sizes: the one `Size` type, its text form ('832x448') and its checks.

Every size a user gives (CLI `--size`, an offer's or a render job's `size`) is parsed here, and each consumer
states its own rule as a multiple: a renderer's (renderer.base.SizeRule), H.264's even sides (video writers)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from alaya_errors import UserError

MAX_SIDE = 4096
H264_RULE = "H.264 yuv420p needs even sides"   # with require_multiple(2, ...): the rule of every video writer
_TEXT = re.compile(r"\s*(\d{1,5})\s*[xX]\s*(\d{1,5})\s*")


class SizeError(UserError):
    """A size that is not WIDTHxHEIGHT, or breaks a rule of whatever will use it."""


@dataclass(frozen=True)
class Size:
    width: int
    height: int

    def __post_init__(self) -> None:
        for side, v in (("width", self.width), ("height", self.height)):
            if not isinstance(v, int) or isinstance(v, bool) or not 1 <= v <= MAX_SIDE:
                raise SizeError(f"{side} must be an integer 1..{MAX_SIDE}, got {v!r}", side)

    @classmethod
    def parse(cls, text: str, where: str = "size") -> "Size":
        """'832x448' (also ' 832X448 ') → Size(832, 448); each side 1..MAX_SIDE."""
        m = _TEXT.fullmatch(str(text))
        if not m:
            raise SizeError(f"size {text!r} is not WIDTHxHEIGHT (for example 832x448)", where)
        width, height = int(m.group(1)), int(m.group(2))
        if not (1 <= width <= MAX_SIDE and 1 <= height <= MAX_SIDE):
            raise SizeError(f"size {width}x{height}: width and height must be 1..{MAX_SIDE}", where)
        return cls(width, height)

    def require_multiple(self, multiple: int, why: str, where: str = "size") -> "Size":
        """This size, if both sides are multiples of `multiple`; else a SizeError that says `why`."""
        if self.width % multiple or self.height % multiple:
            raise SizeError(f"size {self}: width and height must be multiples of {multiple} ({why})", where)
        return self

    def __iter__(self):  # width, height = size
        return iter((self.width, self.height))

    def __str__(self) -> str:
        return f"{self.width}x{self.height}"
