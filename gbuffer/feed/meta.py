"""A frame's metadata on the feed: what the engine knows of the frame that its pixels do not say (the car's
position, speed and driver, its camera), for the studio's inspector and for recordings of the feed.

On the WebSocket feed, a binary message sent just before the frame it belongs to: META_HEADER (magic `AGBM`,
the feed protocol version, the frame index) then one UTF-8 JSON object of at most MAX_META_BYTES. Binary, so
the studio tells it from a frame or a control message by its first four bytes without parsing anything. Only
an engine whose hello said `"meta": true`, answered by a welcome with `"meta": true`, sends it: older studios
and engines never meet it.
On gRPC, the same JSON is the frame's `meta_json` field (an older studio ignores a field it does not know).
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


def meta_json(meta: dict[str, Any]) -> bytes | None:
    """A frame's meta as the JSON a feed carries; None when it has nothing to say or would pass the cap (the frame
    still goes, without it: an engine's metadata never costs it its feed)."""
    entries = json_meta(meta)
    if not entries:
        return None
    try:
        body = json.dumps(entries, allow_nan=False, separators=(",", ":")).encode()
    except (TypeError, ValueError):
        return None
    return body if len(body) <= MAX_META_BYTES else None


def encode_meta(index: int, meta: dict[str, Any]) -> bytes | None:
    """The WebSocket meta message of frame `index`, or None (meta_json)."""
    body = meta_json(meta)
    return None if body is None else META_HEADER.pack(META_MAGIC, FEED_PROTOCOL, index % 2**32) + body


def is_meta(message: bytes) -> bool:
    return message[:4] == META_MAGIC


def decode_meta(message: bytes) -> tuple[int, dict[str, MetaValue]]:
    """One WebSocket meta message → (frame index, its entries); FeedError naming what is wrong."""
    if len(message) < META_HEADER.size:
        raise FeedError(f"meta message of {len(message)} bytes is shorter than its {META_HEADER.size}-byte header")
    magic, version, index = META_HEADER.unpack_from(message)
    if magic != META_MAGIC or version != FEED_PROTOCOL:
        raise FeedError(f"bad meta header (magic {magic!r}, version {version})")
    return index, parse_meta(message[META_HEADER.size:], index)


def parse_meta(body: bytes, index: int) -> dict[str, MetaValue]:
    """A frame's meta JSON (either transport) → its entries; FeedError naming what is wrong. The size is checked
    before anything is parsed, so no more than MAX_META_BYTES is ever parsed."""
    where = f"frame {index}: meta"
    if len(body) > MAX_META_BYTES:
        raise FeedError(f"{len(body)} bytes; at most {MAX_META_BYTES}", where, CLOSE["too_big"])
    try:
        entries = json.loads(body.decode(), parse_constant=_not_finite)
    except UnicodeDecodeError:
        raise FeedError("not UTF-8", where) from None
    except json.JSONDecodeError as exc:
        raise FeedError(f"not JSON ({exc.msg})", where) from None
    except ValueError as exc:                 # NaN or Infinity, at any depth
        raise FeedError(str(exc), where) from None
    except RecursionError:
        raise FeedError("JSON nested too deeply", where) from None
    if not isinstance(entries, dict):
        raise FeedError(f"must be a JSON object, got {type(entries).__name__}", where)
    if CAMERA_KEY in entries:                  # recordings and eval read it: refused here, not deep in them
        try:
            Viewpoint.from_meta(entries, where)
        except GBufferError as exc:
            raise FeedError(exc.detail, where) from None
    return entries


def _not_finite(name: str) -> float:
    raise ValueError(f"holds {name}, which is not a finite number")
