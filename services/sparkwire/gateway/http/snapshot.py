"""``GET /snapshot?stream=<S>[&filter=<JSON>]``: the stream's whole current state, behind the same token as a
hello, as a bearer header; with a filter or a scoped token, the items in that view and its id (issue 43)."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from sparkwire.gateway import metrics
from sparkwire.gateway.auth.tokens import Auth
from sparkwire.gateway.fanout.hub import StreamHub
from sparkwire.gateway.http import bearer
from sparkwire.gateway.http.view_param import compiled, requested_view
from sparkwire.protocol.view_feed import filter_items
from sparkwire.replaylog.port import UNAVAILABLE


def snapshot_endpoint(hubs: Mapping[str, StreamHub], auth_secret: Auth) -> Callable[[Request], Awaitable[Response]]:
    async def snapshot(request: Request) -> Response:
        hub = await bearer.requested(request, auth_secret, hubs)
        if isinstance(hub, Response):
            return hub
        view = requested_view(request, auth_secret, hub.stream)
        if isinstance(view, Response):
            return view
        try:
            snap = await hub.log.snapshot()
            state = snap.items if view is None else filter_items(snap.items, await compiled(hub, view))
        except UNAVAILABLE:
            metrics.REDIS_ERRORS.labels(operation="snapshot").inc()
            return JSONResponse({"error": "redis unavailable"}, status_code=503)
        items = {k: {"seq": v.seq, "processingId": v.processing_id, "data": v.data} for k, v in state.items()}
        document: dict[str, object] = {"epoch": snap.epoch, "seq": snap.seq, "items": items}
        if view is not None:
            document["view"] = view.id
        return Response(json.dumps(document), media_type="application/json")

    return snapshot
