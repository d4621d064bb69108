"""The token check of the HTTP reads (``/snapshot``, ``/history``, ``/descriptor``): the hello's token, as a
bearer header; and which served stream such a read asks for."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypeVar

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from sparkwire.gateway.auth.tokens import Auth, AuthError, verify_token
from sparkwire.protocol.close_codes import CloseCode

T = TypeVar("T")


async def denial(request: Request, secret: Auth, stream: str) -> Response | None:
    """None when auth is off or ``Authorization: Bearer <token>`` grants ``stream``; otherwise the answer:
    401 without a valid token (expired included), 403 for a token that does not grant the stream."""
    if not secret:
        return None
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    try:
        await verify_token(token if scheme.lower() == "bearer" else None, secret, stream)
    except AuthError as error:
        if error.code == CloseCode.FORBIDDEN_STREAM:
            return JSONResponse({"error": error.reason}, status_code=403)
        return JSONResponse({"error": error.reason}, status_code=401, headers={"WWW-Authenticate": "Bearer"})
    return None


async def requested(request: Request, secret: Auth, served: Mapping[str, T]) -> T | Response:
    """What ``served`` holds for the stream the read names (``?stream=``), or the answer refusing it: 401/403
    by the bearer rule, 404 for a stream this gateway does not serve."""
    stream = request.query_params.get("stream", "")
    denied = await denial(request, secret, stream)
    if denied is not None:
        return denied
    found = served.get(stream)
    if found is None:
        return JSONResponse({"error": f"stream {stream!r} is not served here"}, status_code=404)
    return found
