"""The view of an HTTP read (``/snapshot``, ``/history``; issue 43, docs/protocol.md "Filters over HTTP and
SSE"): its ``filter`` parameter (JSON, URL-decoded, at most 4,096 bytes) AND the bearer token's scope for the
stream. A malformed filter is a ``400`` naming the part, one outside the scope a ``403``; with neither, no view
(the read as before)."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from sparkwire.gateway.auth.tokens import Auth, AuthError, check_token
from sparkwire.gateway.fanout.hub import StreamHub
from sparkwire.protocol.filter_form import FilterError, parse_filter_json
from sparkwire.protocol.scope import ScopeViolation, View, make_view
from sparkwire.protocol.view_feed import CompiledView


def requested_view(request: Request, secret: Auth, stream: str) -> View | Response | None:
    """The read's view (None: unfiltered), or the answer refusing it. The token was checked already
    (``bearer.requested``, which had its key fetched): here it is read again for its scope."""
    raw = request.query_params.get("filter")
    try:
        own = None if raw is None else parse_filter_json(raw)
    except FilterError as error:
        return JSONResponse({"error": error.reason}, status_code=400)
    scope = None
    if secret:
        scheme, _, token = request.headers.get("authorization", "").partition(" ")
        try:
            scope = check_token(token if scheme.lower() == "bearer" else None, secret, stream).scope
        except AuthError as error:  # not after bearer.requested let it in; answered as it would be
            return JSONResponse({"error": error.reason}, status_code=401)
    try:
        return make_view(scope, own)
    except ScopeViolation as violation:
        return JSONResponse({"error": violation.reason}, status_code=403)


async def compiled(hub: StreamHub, view: View) -> CompiledView:
    """The view's matchers on this pod, once its stream's mode is known."""
    return (await hub.views_ready()).compiled(view)
