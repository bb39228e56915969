"""Engine feed: the WebSocket protocol an external engine speaks to the studio, the server-side feed source,
and the Python client library."""

from gbuffer.feed.protocol import FEED_PROTOCOL, FeedError, FeedLimits, Hello, decode_frame, encode_frame, parse_hello
from gbuffer.feed.source import Feed, FeedHub, FeedSource

__all__ = ["FEED_PROTOCOL", "Feed", "FeedError", "FeedHub", "FeedLimits", "FeedSource", "Hello", "decode_frame",
           "encode_frame", "parse_hello"]
