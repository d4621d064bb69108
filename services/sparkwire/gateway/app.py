"""The Starlette application of one gateway pod: ``/ws`` and ``/sse`` (``transport``) plus snapshot, history,
streams, descriptor, health, readiness, metrics and the dashboard page (``http``), over a ``pod.Gateway``."""

from __future__ import annotations

from starlette.applications import Starlette
from starlette.routing import Route, WebSocketRoute
from starlette.types import ASGIApp, Receive, Scope, Send
from starlette.websockets import WebSocket

from sparkwire.gateway.http.history import history_endpoint
from sparkwire.gateway.http.pages import page_routes
from sparkwire.gateway.http.probes import healthz, metrics_endpoint, readiness_endpoint
from sparkwire.gateway.http.snapshot import snapshot_endpoint
from sparkwire.gateway.http.streams import descriptor_endpoint, streams_endpoint
from sparkwire.gateway.pod import Gateway
from sparkwire.gateway.transport.sse_routes import SseEndpoints, cross_origin
from sparkwire.gateway.transport.websocket_endpoint import WebSocketEndpoint


def create_app(gateway: Gateway) -> ASGIApp:
    # Lambdas, not coroutines: each open connection keeps every coroutine frame it runs in.
    websocket = WebSocketEndpoint(
        gateway.why_turn_away, lambda socket, transport, stream: gateway.serve(socket, transport, stream, "websocket"))
    # An SSE socket is its own transport.
    sse = SseEndpoints(gateway.why_turn_away, lambda socket, stream: gateway.serve(socket, socket, stream, "sse"))
    hubs, secret, origins = gateway.hubs, gateway.connection.auth_secret, gateway.allowed_origins
    app = Starlette(
        routes=[
            WebSocketRoute("/ws", websocket.handle),
            Route("/sse", cross_origin(sse.stream_route, origins), methods=["POST", "OPTIONS"]),
            Route("/sse/frames", cross_origin(sse.frames_route, origins), methods=["POST", "OPTIONS"]),
            Route("/snapshot", snapshot_endpoint(hubs, secret)),
            Route("/history", history_endpoint(hubs, secret)),
            Route("/streams", streams_endpoint(hubs, secret)),
            Route("/descriptor", descriptor_endpoint(hubs, secret)),
            Route("/healthz", healthz),
            Route("/readyz", readiness_endpoint(gateway.draining, gateway.backend.ping, hubs.values())),
            Route("/metrics", metrics_endpoint),
            *page_routes(),
        ],
        lifespan=lambda _: gateway.running(),
    )

    async def asgi(scope: Scope, receive: Receive, send: Send) -> None:
        """``/ws`` straight to its endpoint: every layer Starlette puts in front of a route (two middlewares,
        the exception handlers, the router) is a coroutine frame an open connection keeps for its lifetime,
        and a few µs of every handshake. The route stays for anything else that reaches the app."""
        if scope["type"] == "websocket" and scope["path"] == "/ws":
            await websocket.handle(WebSocket(scope, receive, send))
            return
        await app(scope, receive, send)

    return asgi


__all__ = ["create_app"]
