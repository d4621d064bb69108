"""The Starlette application of one gateway pod: ``/ws`` plus snapshot, history, health, readiness and metrics."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.applications import Starlette
from starlette.datastructures import Headers, QueryParams
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, PlainTextResponse, Response
from starlette.routing import Mount, Route, WebSocketRoute
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Receive, Scope, Send
from starlette.websockets import WebSocket

from sparkwire.gateway import bearer, metrics
from sparkwire.gateway.connection import Connection
from sparkwire.gateway.ending import refuse
from sparkwire.gateway.history import history_endpoint
from sparkwire.gateway.hub import StreamHub
from sparkwire.gateway.replication_watch import POLL_INTERVAL_S, ReplicationWatch
from sparkwire.gateway.sessions import SessionStore
from sparkwire.gateway.settings import ConnectionSettings
from sparkwire.gateway.sse import AFFINITY_HEADER, CONNECTION_HEADER, SseEndpoints
from sparkwire.gateway.streams import descriptor_endpoint, streams_endpoint
from sparkwire.gateway.tasks import cancel_and_wait
from sparkwire.gateway.wire import AsgiTransport, FrameSocket, Transport, wire_of
from sparkwire.protocol.close_codes import CloseCode
from sparkwire.replaylog.port import UNAVAILABLE, LogBackend

# The live demo page and its scripts.
STATIC_DIR = Path(__file__).parent / "static"
# The browser client, served beside them: its source is the npm package in sparkwire/client/js.
BROWSER_CLIENT = Path(__file__).parents[1] / "client" / "js" / "sparkwire-client.js"
# What makes the readiness probe fail: the store unavailable, or slower than a second to answer.
_NOT_READY: tuple[type[Exception], ...] = (*UNAVAILABLE, TimeoutError)


@dataclass
class Gateway:
    backend: LogBackend  # the log, the sessions and the store's health (Redis; memory in tests)
    streams: list[str]
    connection: ConnectionSettings
    sessions: SessionStore
    allowed_origins: frozenset[str]
    ring_size: int
    send_queue: int
    allow_missing_origin: bool = False
    replication_poll_s: float = POLL_INTERVAL_S
    hubs: dict[str, StreamHub] = field(default_factory=dict)
    draining: asyncio.Event = field(default_factory=asyncio.Event)
    open_connections: int = 0

    def __post_init__(self) -> None:
        self.hubs = {s: StreamHub(self.backend.stream(s), s, ring_size=self.ring_size, queue_size=self.send_queue)
                     for s in self.streams}
        self.replication = ReplicationWatch(self.backend.replication, interval_s=self.replication_poll_s)

    def drain(self) -> None:
        """Refuse new connections (readyz 503) and end the open ones with 1001 going_away."""
        self.draining.set()
        for hub in self.hubs.values():
            hub.end_all("draining")


async def _refuse(websocket: WebSocket, code: CloseCode, reason: str) -> None:
    await websocket.accept()  # accept first: a close code is only visible to a client on an open socket
    await refuse(websocket, code, reason)


def _handshake_origin(websocket: WebSocket) -> str | None:
    """The request's Origin. The headers are read only here: an idle connection does not keep them (about
    1 KB per connection, 5 % of its memory)."""
    server_list = websocket.scope.get("headers")
    origin = Headers(scope=websocket.scope).get("origin")  # which puts a copy of the list in the scope
    for raw in (server_list, websocket.scope.get("headers")):
        if isinstance(raw, list):
            raw.clear()
    return origin


def create_app(gateway: Gateway) -> ASGIApp:
    def refusal(origin: str | None, stream: str) -> tuple[CloseCode, str] | None:
        """Why this pod does not take a connection (WebSocket or SSE) from ``origin`` to ``stream``, if it
        does not. The allow-list stops other sites' pages. Every browser sends Origin on a WebSocket (and
        on a cross-origin POST), so a request without one comes from a non-browser client, or through a
        proxy that strips the header (which would silently switch the check off): refused unless the
        operator allows it."""
        if gateway.allowed_origins:
            if origin is None and not gateway.allow_missing_origin:
                return CloseCode.POLICY_VIOLATION, "an Origin header is required (or --allow-missing-origin)"
            if origin is not None and origin not in gateway.allowed_origins:
                return CloseCode.POLICY_VIOLATION, f"origin {origin!r} not allowed"
        if stream not in gateway.hubs:
            return CloseCode.UNKNOWN_STREAM, f"stream {stream!r} is not served here"
        if gateway.draining.is_set():
            return CloseCode.GOING_AWAY, "pod draining"
        return None

    async def serve(socket: FrameSocket, wire: Transport, stream: str, transport: str) -> None:
        gateway.open_connections += 1
        metrics.CONNECTIONS.labels(stream=stream).inc()
        metrics.CONNECTIONS_ACCEPTED.labels(stream=stream, transport=transport).inc()
        try:
            await Connection(socket, wire, gateway.hubs[stream], gateway.sessions, gateway.connection,
                             gateway.draining).serve()
        finally:
            gateway.open_connections -= 1
            metrics.CONNECTIONS.labels(stream=stream).dec()

    async def websocket_endpoint(websocket: WebSocket) -> None:
        # Parsed here, not through ``websocket.query_params``, which keeps its parse for the connection's lifetime.
        stream = QueryParams(websocket.scope["query_string"]).get("stream", "")
        refused = refusal(_handshake_origin(websocket), stream)
        if refused is not None:
            return await _refuse(websocket, *refused)
        # uvicorn with sparkwire's protocol (`sparkwire gateway`): live batches written straight through;
        # any other ASGI server, or Starlette's TestClient: plain ASGI.
        wire = wire_of(websocket.scope) or AsgiTransport(websocket)
        await websocket.accept()
        await serve(websocket, wire, stream, "websocket")

    sse = SseEndpoints(refusal, lambda socket, stream: serve(socket, socket, stream, "sse"))

    def cross_origin(app: ASGIApp) -> ASGIApp:
        """A page of another origin may use SSE as it may open a WebSocket: its preflight (the affinity header
        makes one) is answered for the allowed origins (any, without an allow-list; the hello's token, not
        the origin, decides who reads), and the connection header is exposed to it."""
        return CORSMiddleware(app, allow_origins=sorted(gateway.allowed_origins) or ["*"], allow_methods=["POST"],
                              allow_headers=["content-type", AFFINITY_HEADER], expose_headers=[CONNECTION_HEADER])

    async def snapshot(request: Request) -> Response:
        # The stream's whole current state: the same token as a hello, as a bearer header.
        hub = bearer.requested(request, gateway.connection.auth_secret, gateway.hubs)
        if isinstance(hub, Response):
            return hub
        try:
            snap = await hub.log.snapshot()
        except UNAVAILABLE:
            metrics.REDIS_ERRORS.labels(operation="snapshot").inc()
            return JSONResponse({"error": "redis unavailable"}, status_code=503)
        items = {k: {"seq": v.seq, "processingId": v.processing_id, "data": v.data} for k, v in snap.items.items()}
        return Response(json.dumps({"epoch": snap.epoch, "seq": snap.seq, "items": items}),
                        media_type="application/json")

    async def healthz(_: Request) -> Response:
        return PlainTextResponse("ok")

    async def readyz(_: Request) -> Response:
        if gateway.draining.is_set():
            return PlainTextResponse("draining", status_code=503)
        try:
            async with asyncio.timeout(1.0):
                await gateway.backend.ping()
        except _NOT_READY:
            return PlainTextResponse("redis unreachable", status_code=503)
        if not all(hub.healthy for hub in gateway.hubs.values()):
            return PlainTextResponse("stream readers not following", status_code=503)
        return PlainTextResponse("ready")

    async def metrics_endpoint(_: Request) -> Response:
        return Response(generate_latest(), media_type=CONTENT_TYPE_LATEST)

    async def demo_page(_: Request) -> Response:
        return FileResponse(STATIC_DIR / "index.html")

    async def browser_client(_: Request) -> Response:
        return FileResponse(BROWSER_CLIENT, media_type="text/javascript")

    @contextlib.asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[None]:
        tasks = [asyncio.create_task(hub.run(), name=f"hub-{s}") for s, hub in gateway.hubs.items()]
        sessions = asyncio.create_task(gateway.sessions.run(), name="session-flush")
        replication = asyncio.create_task(gateway.replication.run(), name="redis-replication")
        try:
            yield
        finally:
            gateway.drain()
            await cancel_and_wait([*tasks, sessions, replication])
            await gateway.backend.close()

    app = Starlette(
        routes=[
            WebSocketRoute("/ws", websocket_endpoint),
            Route("/sse", cross_origin(sse.stream_route), methods=["POST", "OPTIONS"]),
            Route("/sse/frames", cross_origin(sse.frames_route), methods=["POST", "OPTIONS"]),
            Route("/snapshot", snapshot),
            Route("/history", history_endpoint(gateway.hubs, gateway.connection.auth_secret)),
            Route("/streams", streams_endpoint(gateway.hubs, gateway.connection.auth_secret)),
            Route("/descriptor", descriptor_endpoint(gateway.hubs, gateway.connection.auth_secret)),
            Route("/healthz", healthz),
            Route("/readyz", readyz),
            Route("/metrics", metrics_endpoint),
            Route("/", demo_page),
            Route("/static/sparkwire-client.js", browser_client),
            Mount("/static", StaticFiles(directory=STATIC_DIR), name="static"),
        ],
        lifespan=lifespan,
    )

    async def asgi(scope: Scope, receive: Receive, send: Send) -> None:
        """``/ws`` straight to its endpoint: every layer Starlette puts in front of a route (two middlewares,
        the exception handlers, the router) is a coroutine frame an open connection keeps for its lifetime,
        and a few µs of every handshake. The route stays for anything else that reaches the app."""
        if scope["type"] == "websocket" and scope["path"] == "/ws":
            await websocket_endpoint(WebSocket(scope, receive, send))
            return
        await app(scope, receive, send)

    return asgi


__all__ = ["Gateway", "create_app"]
