"""`alaya-studio engine --connect URL`: run the built-in kart engine as an external engine feeding a studio."""

from __future__ import annotations

import re
import sys

from alaya_errors import UserError


def register(sub) -> None:
    p = sub.add_parser("engine", help="run the built-in engine as an external feed into a running studio")
    p.add_argument("--connect", required=True, metavar="URL",
                   help="studio feed URL, e.g. ws://127.0.0.1:7860/api/engine/feed")
    p.add_argument("--name", default="kart", help="feed name; sessions pick it as source 'feed:NAME'")
    p.add_argument("--size", default="416x224", help="WxH of the G-buffer frames")
    p.add_argument("--fps", type=float, default=30.0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--token", help="the studio's feed token (required when it listens beyond loopback)")
    p.add_argument("--frames", type=int, help="stop after this many frames (default: run until closed)")
    p.add_argument("--compression", choices=("zlib", "none"), default="zlib")
    p.set_defaults(func=run)


def run(args) -> int:
    from gbuffer.engine import EngineSource
    from gbuffer.feed.client import FeedClient, stream_source
    from gbuffer.size import Size

    width, height = Size.parse(args.size, "--size")
    if not re.match(r"^wss?://", args.connect):
        raise UserError(f"{args.connect!r} is not a ws:// or wss:// URL", "--connect")
    if not 0 < args.fps <= 240:
        raise UserError(f"{args.fps:g} is not a frame rate in (0, 240]", "--fps")
    client = FeedClient(args.connect, name=args.name, width=width, height=height, fps=args.fps,
                        token=args.token, compression=args.compression)
    with EngineSource(width=width, height=height, fps=args.fps, seed=args.seed, autopilot=True) as engine:
        welcome = client.connect()
        print(f"feeding {welcome['source']} at {width}x{height}, {args.fps:g} fps", file=sys.stderr)
        def take_over(_frame) -> None:  # the first input from a driver switches the autopilot off
            if client.inputs_received and engine.autopilot:
                engine.autopilot = False
        try:
            sent = stream_source(engine, client, max_frames=args.frames, on_frame=take_over)
        finally:
            client.close()
    print(f"sent {sent} frames; {client.inputs_received} inputs received"
          + (f"; closed: {client.close_reason}" if client.close_reason else ""), file=sys.stderr)
    return 0
