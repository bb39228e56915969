"""G-buffer frames, recorded formats, the built-in engine and the engine feed.

Knows nothing of servers, renderers or schedules.
"""

from gbuffer.frame import CHANNELS, NUM_CHANNELS, GBufferError, GBufferFrame
from gbuffer.input import PlayerInput
from gbuffer.source import LiveSource, RecordedSource, Source

__all__ = [
    "CHANNELS",
    "NUM_CHANNELS",
    "GBufferError",
    "GBufferFrame",
    "PlayerInput",
    "LiveSource",
    "RecordedSource",
    "Source",
]
