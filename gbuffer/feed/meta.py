"""A frame's metadata on the feed: what the engine knows of the frame that its pixels do not say (the car's
position, speed and driver, its camera), for the studio's inspector and for recordings of the feed.

A binary message sent just before the frame it belongs to: META_HEADER (magic `AGBM`, the feed protocol version,
the frame index) then one UTF-8 JSON object of at most MAX_META_BYTES. Binary, so the studio tells it from a
frame or a control message by its first four bytes without parsing anything. Only an engine whose hello said
`"meta": true`, answered by a welcome with `"meta": true`, sends it: older studios and engines never meet it.
"""

from __future__ import annotations

import json
import struct
from typing import Any

from gbuffer.feed.protocol import CLOSE, FEED_PROTOCOL, FeedError
from gbuffer.frame import GBufferError
from gbuffer.viewpoint import CAMERA_KEY, Viewpoint

META_MAGIC = b"AGBM"
META_HEADER = struct.Struct("<4sBI")          # magic, protocol version, frame index
MAX_META_BYTES = 8192                         # a kart's or a car's state and its camera take under 1 KB
MetaValue = str | int | float | bool | list | dict | None


def json_meta(meta: dict[str, Any]) -> dict[str, MetaValue]:
    """The entries of a frame's meta that are JSON values (numpy arrays and the studio's own marks are not)."""
    return {k: v for k, v in meta.items() if isinstance(k, str) and isinstance(v, (str, int, float, bool, list, dict))}


def encode_meta(index: int, meta: dict[str, Any]) -> bytes | None:
    """The meta message of frame `index`; None when it has nothing to say or would pass the cap (the frame still
    goes, without it: an engine's metadata never costs it its feed)."""
    entries = json_meta(meta)
    if not entries:
        return None
    try:
        body = json.dumps(entries, allow_nan=False, separators=(",", ":")).encode()
    except (TypeError, ValueError):
        return None
    if len(body) > MAX_META_BYTES:
        return None
    return META_HEADER.pack(META_MAGIC, FEED_PROTOCOL, index % 2**32) + body


def is_meta(message: bytes) -> bool:
    return message[:4] == META_MAGIC


def decode_meta(message: bytes) -> tuple[int, dict[str, MetaValue]]:
    """One meta message → (frame index, its entries); FeedError naming what is wrong. The size is checked before
    anything is parsed, so the event loop never parses more than MAX_META_BYTES."""
    if len(message) < META_HEADER.size:
        raise FeedError(f"meta message of {len(message)} bytes is shorter than its {META_HEADER.size}-byte header")
    magic, version, index = META_HEADER.unpack_from(message)
    if magic != META_MAGIC or version != FEED_PROTOCOL:
        raise FeedError(f"bad meta header (magic {magic!r}, version {version})")
    body = message[META_HEADER.size:]
    if len(body) > MAX_META_BYTES:
        raise FeedError(f"frame {index}: meta of {len(body)} bytes; at most {MAX_META_BYTES}", code=CLOSE["too_big"])
    try:
        entries = json.loads(body.decode(), parse_constant=_not_finite)
    except UnicodeDecodeError:
        raise FeedError(f"frame {index}: meta is not UTF-8") from None
    except json.JSONDecodeError as exc:
        raise FeedError(f"frame {index}: meta is not JSON ({exc.msg})") from None
    except ValueError as exc:                 # NaN or Infinity, at any depth
        raise FeedError(f"frame {index}: meta {exc}") from None
    except RecursionError:
        raise FeedError(f"frame {index}: meta JSON nested too deeply") from None
    if not isinstance(entries, dict):
        raise FeedError(f"frame {index}: meta must be a JSON object, got {type(entries).__name__}")
    if CAMERA_KEY in entries:                  # recordings and eval read it: refused here, not deep in them
        try:
            Viewpoint.from_meta(entries, f"frame {index}: meta")
        except GBufferError as exc:
            raise FeedError(str(exc), None) from None
    return index, entries


def _not_finite(name: str) -> float:
    raise ValueError(f"holds {name}, which is not a finite number")
