"""`alaya-studio engine [kart|panda3d] --connect URL`: run an engine as an external feed into a running studio.

    alaya-studio engine --connect URL             the built-in kart engine
    alaya-studio engine panda3d --connect URL     Panda3D's environment with a Bullet car (the `engines` extra),
                                                  each frame paired with its own lit image; --show opens a window
    ... panda3d --connect URL --receive           and shows the styled frames the studio sends back (protocol 2);
                                                  its last line is JSON with the round-trip figures
"""

from __future__ import annotations

import json
import re
import sys

from alaya_errors import UserError

ENGINES = ("kart", "panda3d")


def register(sub) -> None:
    p = sub.add_parser("engine", help="run an engine (built-in kart, or panda3d) as an external feed into a studio",
                       description=__doc__.split("\n\n")[0])
    p.add_argument("kind", nargs="?", choices=ENGINES, default="kart", help="which engine (default: kart)")
    p.add_argument("--connect", required=True, metavar="URL",
                   help="studio feed URL, e.g. ws://127.0.0.1:7860/api/engine/feed")
    p.add_argument("--name", help="feed name; sessions pick it as source 'feed:NAME' (default: the engine's kind)")
    p.add_argument("--size", default="416x224", help="WxH of the G-buffer frames")
    p.add_argument("--fps", type=float, default=30.0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--token", help="the studio's feed token (required when it listens beyond loopback)")
    p.add_argument("--frames", type=int, help="stop after this many frames (default: run until closed)")
    p.add_argument("--compression", choices=("zlib", "none"), default="zlib")
    p.add_argument("--reconnect-for", type=float, default=600.0, metavar="S",
                   help="when the studio goes away (a restart, a dropped network), connect again for up to S "
                        "seconds, waiting 0.5 s doubling to 5 s between tries (default 600; 0: stop; not with "
                        "--receive, whose session would be a new one)")
    p.add_argument("--show", action="store_true", help="panda3d: also show its lit frame in a window (needs a display)")
    p.add_argument("--receive", action="store_true",
                   help="panda3d: show the styled frames the studio sends back (feed protocol 2; offscreen with no "
                        "display) and print a last line of JSON with frames and round-trip times")
    p.add_argument("--prompt", help="--receive: the style of the engine's session (default: the studio's)")
    p.add_argument("--format", choices=("rgb24", "jpeg"), default="rgb24", help="--receive: how frames come back")
    p.set_defaults(func=run)


def run(args) -> int:
    from gbuffer.feed.client import FeedClient
    from gbuffer.size import Size

    width, height = Size.parse(args.size, "--size")
    if not re.match(r"^wss?://", args.connect):
        raise UserError(f"{args.connect!r} is not a ws:// or wss:// URL", "--connect")
    if not 0 < args.fps <= 240:
        raise UserError(f"{args.fps:g} is not a frame rate in (0, 240]", "--fps")
    if args.kind == "kart" and (args.show or args.receive):
        raise UserError(f"{'--show' if args.show else '--receive'} is for the panda3d engine", "engine")
    output = {"format": args.format, **({"prompt": args.prompt} if args.prompt else {})} if args.receive else None
    if args.reconnect_for < 0:
        raise UserError(f"{args.reconnect_for:g} is not a number of seconds >= 0", "--reconnect-for")
    client = FeedClient(args.connect, name=args.name or args.kind, width=width, height=height, fps=args.fps,
                        token=args.token, compression=args.compression, rgb=args.kind == "panda3d", output=output,
                        reconnect_for_s=0.0 if args.receive else args.reconnect_for)
    return (run_panda3d if args.kind == "panda3d" else run_kart)(args, client, width, height)


def run_kart(args, client, width: int, height: int) -> int:
    from gbuffer.engine import EngineSource
    from gbuffer.feed.client import stream_source

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
    _report(sent, client)
    return 0


def run_panda3d(args, client, width: int, height: int) -> int:
    """Panda3D offscreen (no display needed); the first input from a driver ends its cruise."""
    from gbuffer.feed.client import stream_source
    from gbuffer.panda3d import Panda3DSource
    from gbuffer.panda3d.receive import StyledFrames, styled_window
    from gbuffer.panda3d.window import FrameWindow

    with Panda3DSource(width=width, height=height, fps=args.fps) as game:
        lit = FrameWindow(width, height) if args.show else None
        styled = StyledFrames(client, styled_window(width, height)) if args.receive else None
        welcome = client.connect()
        print(f"feeding {welcome['source']} from panda3d at {width}x{height}, {args.fps:g} fps, with its lit "
              f"frame", file=sys.stderr)
        last = -1

        def on_frame(frame) -> None:
            nonlocal last
            last = frame.index
            if lit is not None:
                lit.show(frame.rgb)
            if styled is not None:
                styled.show_newest()
        if styled is not None:
            where = "offscreen (no display)" if styled.window.readback is not None else "in a window"
            print(f"receiving the styled frames of session {welcome['session_id']}, drawn {where}; watch it at "
                  f"{welcome['watch']}", file=sys.stderr)
            styled.start()
        try:
            sent = stream_source(game, client, max_frames=args.frames, on_frame=on_frame)
            if styled is not None:
                styled.finish(last)
        finally:
            client.close()
            for window in (lit, styled.window if styled else None):
                if window is not None:
                    window.close()
    _report(sent, client)
    if styled is not None:
        print(json.dumps(styled.report(sent)))      # the last line: frames and round-trip times
    return 0


def _report(sent: int, client) -> None:
    print(f"sent {sent} frames; {client.inputs_received} inputs received"
          + (f"; reconnected {client.reconnects} time(s)" if client.reconnects else "")
          + (f"; closed: {client.close_reason}" if client.close_reason else ""), file=sys.stderr)
