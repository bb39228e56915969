"""The engine feed over gRPC (`serve --grpc-port N`; the contract: gbuffer/feed/grpc/engine_feed.proto,
docs/engines.md "gRPC"): the same feeds, sessions and limits as the WebSocket route (studio/server/feed_routes.py),
served by grpc.aio on the studio's own event loop, with server reflection on.

A bad message ends its own stream with one line (INVALID_ARGUMENT naming the field, or the status its feed error
stands for); every other stream and session goes on. Only this module and the stubs import grpc, and only
`serve --grpc-port` imports this module: the default studio loads none of it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import socket

import grpc
from fastapi import FastAPI
from grpc_reflection.v1alpha import reflection

from alaya_errors import UserError
from gbuffer.feed import FeedHub
from gbuffer.feed.grpc import engine_feed_pb2 as pb
from gbuffer.feed.grpc import engine_feed_pb2_grpc as rpc
from gbuffer.feed.grpc.messages import parse_open
from gbuffer.feed.protocol import FeedError, max_message_bytes
from studio.server import access
from studio.server.access import Visitors
from studio.server.grpc_stream import EngineStream, Outgoing, StreamFailed, first_open, open_link, welcome
from studio.server.session import LiveSession
from studio.server.sessions import SessionManager
from studio.server.settings import Settings
from studio.server.tasks import TaskSet
from webrtc import protocol as dc

log = logging.getLogger("alaya.grpc")
SERVICE = pb.DESCRIPTOR.services_by_name["EngineFeed"].full_name     # alaya.engine.v1.EngineFeed
SCHEDULE_TIMEOUT_S = 30.0            # a schedule replacement waits for the session's worker at most this long


def bearer(context: grpc.aio.ServicerContext) -> str | None:
    """The KEY of the call's `authorization: Bearer KEY` metadata."""
    metadata = dict(context.invocation_metadata() or ())
    return access.bearer(metadata.get("authorization"))


class EngineFeedService(rpc.EngineFeedServicer):
    def __init__(self, settings: Settings, hub: FeedHub, manager: SessionManager, visitors: Visitors):
        self.settings, self.hub, self.manager, self.visitors = settings, hub, manager, visitors

    # ---- the stream --------------------------------------------------------------------------------------

    async def Stream(self, requests, context: grpc.aio.ServicerContext):
        if self.settings.token and not access.same_key(bearer(context), self.settings.token):
            await context.abort(grpc.StatusCode.UNAUTHENTICATED,
                                "a valid token is required (metadata authorization: Bearer TOKEN)")
        out = Outgoing(asyncio.get_running_loop())
        tasks = TaskSet("grpc feed")
        feed = link = None
        try:
            incoming = aiter(requests)
            opened = await first_open(incoming)
            hello = parse_open(opened, self.hub.limits)
            feed = self.hub.register(hello, out.send)
            if opened.HasField("output"):
                link = await open_link(self.manager, self.visitors, self.settings, feed, opened.output)
            yield welcome(hello, self.hub.limits, link)
            stream = EngineStream(hello, feed, link, out, self.settings.feed_idle_timeout_s)
            tasks.spawn(stream.read(incoming), name=f"grpc-read-{hello.name}")
            if link is not None:
                for part in (stream.control, stream.styled, stream.messages):
                    tasks.spawn(part(), name=f"grpc-{part.__name__}-{hello.name}")
            while (message := await out.next()) is not None:
                yield message
        except FeedError as exc:
            log.info("grpc feed %s refused: %s", feed.name if feed else "?", exc)
            await context.abort(StreamFailed.of(exc).code, str(exc))
        except StreamFailed as exc:
            log.info("grpc feed %s closed: %s", feed.name if feed else "?", exc.line)
            await context.abort(exc.code, exc.line)
        finally:
            await tasks.close()
            if feed is not None:
                self.hub.remove(feed)     # first: it wakes the session's read of the feed
            if link is not None:
                await link.close()

    # ---- the schedule calls ------------------------------------------------------------------------------

    async def _owned_session(self, session_id: str, context: grpc.aio.ServicerContext) -> LiveSession:
        """The session for its owner's key or the admin token (UNAUTHENTICATED for anyone else, before anything
        says whether it exists, as the REST routes do), then NOT_FOUND if it has ended."""
        session = self.manager.sessions.get(session_id)
        if not self.visitors.may_act(bearer(context), session.owner_key if session is not None else None):
            await context.abort(grpc.StatusCode.UNAUTHENTICATED, access.REFUSED)
        if session is None or session.state == "closed":
            await context.abort(grpc.StatusCode.NOT_FOUND, f"no live session {session_id!r} (it may have ended)")
        return session

    async def GetSchedule(self, request: pb.ScheduleRequest, context) -> pb.ScheduleReply:
        session = await self._owned_session(request.session_id, context)
        return pb.ScheduleReply(json=json.dumps(session.schedule.to_json()), frame=session.frame_index)

    async def SetSchedule(self, request: pb.SetScheduleRequest,
                          context: grpc.aio.ServicerContext) -> pb.ScheduleReply:
        """The data channel's `schedule` message, through the session's control: parsed and applied by the
        session's worker between chunks (a long Parseq export takes seconds, never on the event loop)."""
        session = await self._owned_session(request.session_id, context)
        try:
            answer = await session.control.ask(dc.build(dc.SetSchedule, text=request.schedule,
                                                        from_now=request.from_now), SCHEDULE_TIMEOUT_S)
        except UserError as exc:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
        if isinstance(answer, dc.Error):      # the line a UserError says: "where: what is wrong"
            line = f"{answer.where}: {answer.message}" if answer.where else answer.message
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, line)
        if not isinstance(answer, dc.Ack):
            await context.abort(grpc.StatusCode.UNAVAILABLE, "the session did not apply the schedule in time")
        return pb.ScheduleReply(json=json.dumps(session.schedule.to_json()), frame=answer.frame)


# ---- the server --------------------------------------------------------------------------------------------

def address(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def require_free_port(host: str, port: int) -> None:
    """Say now, in one line, that the port is taken (the server binds it only once the app starts)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family) as probe:
        try:
            probe.bind((host, port))
        except OSError as exc:
            raise UserError(f"cannot listen on {address(host, port)}: {exc.strerror}", "--grpc-port") from None


async def start_server(app: FastAPI, host: str, port: int) -> grpc.aio.Server:
    """A started grpc.aio server on the running loop, serving the app's feeds and sessions (and reflection)."""
    state = app.state
    limit = max_message_bytes(state.feeds.limits)
    # so_reuseport off: a second studio on the same port fails instead of sharing it
    server = grpc.aio.server(options=[("grpc.max_receive_message_length", limit),
                                      ("grpc.max_send_message_length", limit), ("grpc.so_reuseport", 0)])
    rpc.add_EngineFeedServicer_to_server(EngineFeedService(state.settings, state.feeds, state.sessions,
                                                           state.visitors), server)
    reflection.enable_server_reflection((SERVICE, reflection.SERVICE_NAME), server)
    server.add_insecure_port(address(host, port))
    await server.start()
    return server


def serve_grpc(app: FastAPI) -> FastAPI:
    """Run the gRPC server with the app, on its settings' host and `grpc_port`: started after the app's own
    start-up, stopped before its shutdown."""
    inner = app.router.lifespan_context
    host, port = app.state.settings.host, app.state.settings.grpc_port

    @contextlib.asynccontextmanager
    async def lifespan(app_: FastAPI):
        async with inner(app_) as state:
            server = await start_server(app, host, port)
            log.info("engine feed over gRPC on %s", address(host, port))
            try:
                yield state
            finally:
                await server.stop(grace=2.0)

    app.router.lifespan_context = lifespan
    return app
