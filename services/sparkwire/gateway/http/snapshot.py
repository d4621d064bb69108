"""``GET /snapshot?stream=<S>``: the stream's whole current state, behind the same token as a hello, as a bearer
header."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from sparkwire.gateway import metrics
from sparkwire.gateway.fanout.hub import StreamHub
from sparkwire.gateway.http import bearer
from sparkwire.replaylog.port import UNAVAILABLE


def snapshot_endpoint(hubs: Mapping[str, StreamHub], auth_secret: str) -> Callable[[Request], Awaitable[Response]]:
    async def snapshot(request: Request) -> Response:
        hub = bearer.requested(request, auth_secret, hubs)
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

    return snapshot
