"""G-buffer inspector: the newest rendered frame of a live session (its five input channels and the output).

The session's worker thread owns the rollout, so the inspector never calls into it: it reads the session's
`latest_frame`, which the worker replaces whole after each chunk.
"""

from __future__ import annotations

import io
import time
from typing import Any

from PIL import Image
from pydantic import BaseModel, Field

from gbuffer.feed.meta import json_meta
from studio.offline import side_by_side
from timeline.rollout import RenderedFrame


def wait_latest(session, timeout: float) -> RenderedFrame | None:
    """The session's newest frame, waiting up to `timeout` s for the first one (blocking: call from a worker)."""
    deadline = time.monotonic() + timeout
    while session.latest_frame is None and time.monotonic() < deadline:
        time.sleep(0.05)
    return session.latest_frame


def inspector_png(frame: RenderedFrame) -> bytes:
    """A labelled 3x2 grid: output, albedo, depth / metallic, normal, roughness (the offline side-by-side)."""
    buf = io.BytesIO()
    Image.fromarray(side_by_side(frame.rgb, frame.gbuffer)).save(buf, format="PNG", compress_level=1)
    return buf.getvalue()


class InspectorInfo(BaseModel):
    """What the page shows beside the inspector's grid."""

    frame: int
    label: str = Field(description="the frame's prompt")
    meta: dict[str, Any] = Field(description="the source's metadata (built-in engine: kart position, speed, …)")


def inspector_info(frame: RenderedFrame) -> InspectorInfo:
    """Frame index, prompt label and the source's metadata (for the built-in engine: kart position, heading,
    speed, autopilot); metadata that is no JSON value is left out."""
    return InspectorInfo(frame=frame.index, label=frame.conditioning.label(), meta=json_meta(frame.gbuffer.meta))
