"""The token check of the HTTP reads (``/snapshot``, ``/history``): the hello's token, as a bearer header."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from sparkwire.gateway.auth import AuthError, check_token
from sparkwire.protocol.close_codes import CloseCode


def refusal(request: Request, secret: str, stream: str) -> Response | None:
    """None when auth is off or ``Authorization: Bearer <token>`` grants ``stream``; otherwise the answer:
    401 without a valid token (expired included), 403 for a token that does not grant the stream."""
    if not secret:
        return None
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    try:
        check_token(token if scheme.lower() == "bearer" else None, secret, stream)
    except AuthError as error:
        if error.code == CloseCode.FORBIDDEN_STREAM:
            return JSONResponse({"error": error.reason}, status_code=403)
        return JSONResponse({"error": error.reason}, status_code=401, headers={"WWW-Authenticate": "Bearer"})
    return None
