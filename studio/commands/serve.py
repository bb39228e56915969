"""`alaya-studio serve`: the live studio (REST API, WebRTC sessions, engine feeds) on http://127.0.0.1:7860."""

from __future__ import annotations

import secrets
import sys
from pathlib import Path

from alaya_errors import UserError


def register(sub) -> None:
    p = sub.add_parser("serve", help="run the live studio server (WebRTC streaming, engine feeds)")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1: this machine only)")
    p.add_argument("--port", type=int, default=7860)
    p.add_argument("--max-sessions", type=int, default=4, help="concurrent live sessions (default 4)")
    p.add_argument("--renderer", default="reference", help="default renderer: reference or flash")
    p.add_argument("--weights", type=Path, help="weights directory for the flash renderer")
    p.add_argument("--cluster", metavar="ADDRESS",
                   help="render on workers on Ray (the `cluster` extra): local (start Ray here), auto (join the "
                        "running cluster, else start one) or ray://HOST:PORT")
    p.add_argument("--workers", type=int, default=2, help="with --cluster: render workers to keep (default 2)")
    p.add_argument("--worker-sessions", type=int, default=2,
                   help="with --cluster: sessions one worker hosts at most (default 2)")
    p.add_argument("--batch-sessions", nargs="?", type=float, const=10.0, default=None, metavar="WAIT_MS",
                   help="render sessions of one renderer in shared batched passes (flash: one transformer pass "
                        "for all); a late session's chunk is waited for at most WAIT_MS (default 10)")
    p.add_argument("--max-batch", type=int, default=4, help="most sessions in one pass (with --batch-sessions)")
    p.add_argument("--renderer-option", action="append", metavar="KEY=VALUE",
                   help="setting of the default renderer, repeatable (flash: num_steps=2, sampler_update=renoise, "
                        "...; reference: backend=auto|gl|torch)")
    p.add_argument("--token", help="token engine feeds must present (generated when --host is not loopback)")
    p.add_argument("--data-dir", type=Path, help="folder of recorded sequences visitors may pick as a source")
    p.add_argument("--size", default="416x224", help="default session size WxH")
    p.add_argument("--fps", type=float, default=30.0, help="default session frame rate")
    p.add_argument("--takes-dir", type=Path, help="where takes are recorded (default: DATA_DIR/takes, else ./takes)")
    p.add_argument("--take-min-free-mb", type=float, default=256, metavar="MB",
                   help="a take stops cleanly when its disk has less free space than this (default 256)")
    p.add_argument("--grpc-port", type=int, metavar="N",
                   help="also take engine feeds over gRPC on this TCP port, on --host (the `engines` extra; "
                        "docs/engines.md)")
    p.add_argument("--osc-port", type=int, help="listen for OSC show control on this UDP port (docs/presenting.md)")
    p.add_argument("--osc-host", default="127.0.0.1", help="address for OSC (default 127.0.0.1)")
    p.add_argument("--osc-session", help="session OSC commands go to (default: the newest)")
    p.add_argument("--osc-allow-remote", action="store_true",
                   help="allow --osc-host beyond loopback (OSC carries no credentials: anyone on that network "
                        "steers every session)")
    p.add_argument("--admin-token", help="token of the operator and presenters: every session, GET /api/sessions "
                   "(generated when --host is not loopback; docs/deploy.md)")
    p.add_argument("--max-feeds", type=int, default=4, help="engine feeds connected at once (default 4)")
    p.add_argument("--allowed-origin", action="append", default=[], metavar="URL",
                   help="a web page's origin (https://host[:port]) that may open the engine feed besides the "
                        "studio's own; repeatable")
    p.add_argument("--metrics-token", help="token a Prometheus scraper presents for /metrics, which names every live "
                   "session (the admin token opens it too)")
    ice = p.add_argument_group("ICE (reaching the studio from other networks; see docs/deploy.md)")
    ice.add_argument("--ice-server", action="append", default=[], metavar="URL",
                     help="stun:HOST[:PORT], turn:HOST[:PORT][?transport=udp|tcp] or turns:HOST[:PORT]; repeatable")
    ice.add_argument("--turn-user", help="TURN long-term credentials: user (with --turn-password)")
    ice.add_argument("--turn-password", help="TURN long-term credentials: password")
    ice.add_argument("--turn-secret", help="TURN REST API shared secret (coturn use-auth-secret): the studio mints "
                     "time-limited credentials per peer")
    ice.add_argument("--ice-transport-policy", choices=("all", "relay"), default="all",
                     help="relay: every peer connects through the TURN server (locked-down networks)")
    p.add_argument("--max-watchers", type=int, default=10, help="audience peers per session (watch links, WHEP)")
    disk = p.add_argument_group("disk per visitor (docs/deploy.md)")
    disk.add_argument("--max-uploads", type=int, default=8, help="uploads one visitor holds at a time (default 8)")
    disk.add_argument("--max-takes", type=int, default=8, help="takes one visitor holds at a time (default 8)")
    disk.add_argument("--disk-quota-mb", type=float, default=8192, metavar="MB",
                      help="uploads and takes of all visitors together (default 8192)")
    p.set_defaults(func=run)


def settings_from_args(args):
    from gbuffer.size import Size
    from renderer import renderer_spec
    from studio.commands._args import check_renderer_options, parse_renderer_options
    from studio.server.access import DiskLimits
    from studio.server.settings import Settings

    if not 1 <= args.port <= 65535:
        raise UserError(f"{args.port} is not a TCP port", "--port")
    if args.max_sessions < 1:
        raise UserError(f"{args.max_sessions} must be at least 1", "--max-sessions")
    if args.batch_sessions is not None and not 0 <= args.batch_sessions <= 1000:   # NaN fails this too
        raise UserError(f"{args.batch_sessions:g} must be 0..1000 milliseconds", "--batch-sessions")
    if args.max_batch < 1:
        raise UserError(f"{args.max_batch} must be at least 1", "--max-batch")
    if args.cluster is not None:
        if args.cluster not in ("local", "auto") and not args.cluster.startswith("ray://"):
            raise UserError(f"{args.cluster!r} is not local, auto or ray://HOST:PORT", "--cluster")
        try:
            import ray  # noqa: F401 - only to say now that the extra is missing
        except ImportError:
            raise UserError("Ray is not installed: pip install '.[cluster]'", "--cluster") from None
    for flag, value in (("--workers", args.workers), ("--worker-sessions", args.worker_sessions)):
        if value < 1:
            raise UserError(f"{value} must be at least 1", flag)
    width, height = Size.parse(args.size, "--size")
    if args.grpc_port is not None and not 1 <= args.grpc_port <= 65535:
        raise UserError(f"{args.grpc_port} is not a TCP port", "--grpc-port")
    if args.grpc_port is not None and args.grpc_port == args.port:
        raise UserError(f"{args.grpc_port} is the studio's --port already", "--grpc-port")
    if args.osc_port is not None and not 1 <= args.osc_port <= 65535:
        raise UserError(f"{args.osc_port} is not a UDP port", "--osc-port")
    if args.admin_token is not None and len(args.admin_token) < 16:
        raise UserError("use at least 16 characters (or leave it out to have one generated)", "--admin-token")
    if args.max_feeds < 0:
        raise UserError(f"{args.max_feeds} must be 0 or more", "--max-feeds")
    for origin in args.allowed_origin:
        if not origin.startswith(("http://", "https://")) or origin.rstrip("/").count("/") != 2:
            raise UserError(f"{origin!r} is no origin; write scheme://host[:port], e.g. https://studio.example.com",
                            "--allowed-origin")
    if args.metrics_token is not None and len(args.metrics_token) < 16:
        raise UserError("use at least 16 characters", "--metrics-token")
    if args.data_dir is not None and not args.data_dir.is_dir():
        raise UserError(f"{args.data_dir} is not a directory", "--data-dir")
    if args.weights is not None and not args.weights.is_dir():
        raise UserError(f"{args.weights} is not a directory", "--weights")
    if args.max_watchers < 0:
        raise UserError(f"{args.max_watchers} must be 0 or more", "--max-watchers")
    if not 0 <= args.take_min_free_mb < 2**40:   # NaN fails this too
        raise UserError(f"{args.take_min_free_mb:g} must be 0 or more megabytes", "--take-min-free-mb")
    for flag, value in (("--max-uploads", args.max_uploads), ("--max-takes", args.max_takes)):
        if value < 0:
            raise UserError(f"{value} must be 0 or more", flag)
    if not 0 <= args.disk_quota_mb < 2**40:   # NaN fails this too
        raise UserError(f"{args.disk_quota_mb:g} must be 0 or more megabytes", "--disk-quota-mb")
    options = parse_renderer_options(args.renderer_option)
    for key, value in renderer_spec(args.renderer).live_options.items():   # what a live studio wants of it
        options.setdefault(key, value)
    check_renderer_options(args.renderer, options)
    if args.weights:
        options["weights"] = str(args.weights)
    settings = Settings(host=args.host, port=args.port, max_sessions=args.max_sessions, renderer=args.renderer,
                    renderer_options=options, token=args.token, data_dir=args.data_dir,
                    width=width, height=height, fps=args.fps, ice=ice_from_args(args),
                    max_watchers=args.max_watchers, takes_dir=args.takes_dir,
                    take_min_free=int(args.take_min_free_mb * 2**20), osc_port=args.osc_port,
                    osc_host=args.osc_host, osc_session=args.osc_session, osc_allow_remote=args.osc_allow_remote,
                    admin_token=args.admin_token, metrics_token=args.metrics_token, max_feeds=args.max_feeds,
                    allowed_origins=tuple(o.rstrip("/") for o in args.allowed_origin),
                    batch_wait_ms=args.batch_sessions,
                    disk=DiskLimits(args.max_uploads, args.max_takes, int(args.disk_quota_mb * 2**20)),
                    max_batch=args.max_batch, cluster=args.cluster, workers=args.workers,
                    worker_sessions=args.worker_sessions, grpc_port=args.grpc_port)
    if settings.osc_port is not None:
        from studio.server.osc import refuse_remote

        refuse_remote(settings)
    return settings


def with_grpc(app):
    """The app with the engine feed's gRPC server beside it (imported only here: grpc is an extra)."""
    try:
        from studio.server.grpc_service import require_free_port, serve_grpc
    except ImportError as exc:
        raise UserError(f"gRPC is not installed ({exc.name} is missing): pip install '.[engines]'",
                        "--grpc-port") from None
    settings = app.state.settings
    require_free_port(settings.host, settings.grpc_port)
    print(f"engine feed over gRPC on {settings.host}:{settings.grpc_port} (docs/engines.md)", file=sys.stderr)
    return serve_grpc(app)


def ice_from_args(args):
    from webrtc.ice import IceConfig

    return IceConfig(tuple(args.ice_server), turn_user=args.turn_user, turn_password=args.turn_password,
                     turn_secret=args.turn_secret, policy=args.ice_transport_policy)


def expose_warning(settings) -> str | None:
    """Beyond loopback, engine feeds and the admin need tokens (generated if not given): say so."""
    if settings.loopback:
        return None
    if not settings.token:
        settings.token = secrets.token_urlsafe(16)
    if not settings.admin_token:
        settings.admin_token = secrets.token_urlsafe(24)
    return (f"warning: listening on {settings.host}, reachable from other machines: anyone who can reach it can "
            "start sessions of their own (each controlled only with its owner key), engine feeds must present "
            f"the token {settings.token}, and the admin token is {settings.admin_token} "
            "(Authorization: Bearer TOKEN)"
            + ("" if settings.ice.servers else "; visitors on other networks (behind NAT) may need a TURN server: "
               "--ice-server turn:HOST --turn-secret S, see docs/deploy.md"))


def run(args) -> int:
    import uvicorn

    from studio.server.feed_routes import websocket_options
    from studio.server import create_app
    from studio.server.goodbye import StudioServer
    from studio.server.allocator import limit_arenas
    from studio.ui import mount_ui

    limit_arenas()     # before any thread of the server's (Ray's included) has picked an arena of its own
    settings = settings_from_args(args)     # an unknown renderer is one line there (its RendererSpec)
    if (warning := expose_warning(settings)) is not None:
        print(warning, file=sys.stderr)
    pool = None
    if settings.cluster:                 # before the server: a bad address or a worker that cannot start is one line
        from studio.server.app import start_pool

        print(f"starting render workers on Ray ({settings.cluster})…", file=sys.stderr)
        pool = start_pool(settings)
    core = create_app(settings, player_at_root=False, pool=pool)
    app = mount_ui(core)
    if settings.grpc_port is not None:
        app = with_grpc(app)
    print(f"AlayaStudio on http://{settings.host}:{settings.port}  (studio: /studio, plain player: /player, "
          "API docs: /docs)",
          file=sys.stderr)
    config = uvicorn.Config(app, host=settings.host, port=settings.port, log_level="warning",
                            **websocket_options(settings))
    StudioServer(config, core.state.goodbyes).run()    # the feeds hear why the studio stops (goodbye.py)
    return 0
