"""``GET /streams`` and ``GET /descriptor?stream=<S>``: which streams a gateway serves and how each is drawn
(the descriptor its ``sparkwire.spark`` writer stored; docs/protocol.md, "GET /descriptor")."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from sparkwire.gateway import metrics
from sparkwire.gateway.auth.tokens import Auth
from sparkwire.gateway.fanout.hub import StreamHub
from sparkwire.gateway.http import bearer
from sparkwire.replaylog.port import UNAVAILABLE

Endpoint = Callable[[Request], Awaitable[Response]]


def streams_endpoint(hubs: Mapping[str, StreamHub], auth_secret: Auth) -> Endpoint:
    async def streams(request: Request) -> Response:
        """The served streams; with auth on, those the bearer token grants (none without a token)."""
        names = [name for name in sorted(hubs) if await bearer.denial(request, auth_secret, name) is None]
        return JSONResponse({"streams": names})

    return streams


def descriptor_endpoint(hubs: Mapping[str, StreamHub], auth_secret: Auth) -> Endpoint:
    async def descriptor(request: Request) -> Response:
        hub = await bearer.requested(request, auth_secret, hubs)
        if isinstance(hub, Response):
            return hub
        try:
            document = await hub.log.descriptor()
        except UNAVAILABLE:
            metrics.REDIS_ERRORS.labels(operation="descriptor").inc()
            return JSONResponse({"error": "redis unavailable"}, status_code=503)
        if document is None:
            return JSONResponse({"error": f"stream {hub.stream!r} has no descriptor (its writer stored none yet)"},
                                status_code=404)
        return Response(document, media_type="application/json")

    return descriptor
