"""``GET /healthz`` (the process answers), ``GET /readyz`` (not draining, the store answering within a second,
every stream's reader following) and ``GET /metrics`` (Prometheus)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Collection

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response

from sparkwire.gateway.fanout.hub import StreamHub
from sparkwire.replaylog.port import UNAVAILABLE

# What makes the readiness probe fail: the store unavailable, or slower than a second to answer.
_NOT_READY: tuple[type[Exception], ...] = (*UNAVAILABLE, TimeoutError)


async def healthz(_: Request) -> Response:
    return PlainTextResponse("ok")


def readiness_endpoint(draining: asyncio.Event, ping: Callable[[], Awaitable[object]],
                       hubs: Collection[StreamHub]) -> Callable[[Request], Awaitable[Response]]:
    """``/readyz`` of a pod that drains on ``draining``, reaches its store with ``ping`` and reads ``hubs``."""

    async def readyz(_: Request) -> Response:
        if draining.is_set():
            return PlainTextResponse("draining", status_code=503)
        try:
            async with asyncio.timeout(1.0):
                await ping()
        except _NOT_READY:
            return PlainTextResponse("redis unreachable", status_code=503)
        if not all(hub.healthy for hub in hubs):
            return PlainTextResponse("stream readers not following", status_code=503)
        return PlainTextResponse("ready")

    return readyz


async def metrics_endpoint(_: Request) -> Response:
    return Response(generate_latest(), media_type=CONTENT_TYPE_LATEST)
