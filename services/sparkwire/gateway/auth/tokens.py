"""Signed tokens: JWT HS256 (PyJWT), expiry required, the streams a client may read in a claim."""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import jwt

from sparkwire.protocol.close_codes import CloseCode

STREAMS_CLAIM = "streams"
ALGORITHM = "HS256"
# Clock skew tolerated between the token issuer and the gateway, at the hello and while connected.
LEEWAY_SECONDS = 5
# RFC 7519's NumericDate claims: PyJWT compares them through int(), which takes "1700000000" as well, so a
# token with a string there was accepted (issue 39); they are checked to be JSON numbers here.
NUMERIC_DATE_CLAIMS = ("exp", "iat", "nbf")
# RFC 7518 section 3.2: an HS256 key at least as long as the hash output.
MIN_SECRET_BYTES = 32


@dataclass(frozen=True)
class AuthError(Exception):
    code: CloseCode
    reason: str


def issue_token(secret: str, streams: list[str], ttl_seconds: int, *, subject: str = "client", now: int) -> str:
    """A token for ``streams`` (``["*"]`` for all) valid ``ttl_seconds`` from ``now`` (for tools and tests)."""
    claims = {"sub": subject, STREAMS_CLAIM: streams, "iat": now, "exp": now + ttl_seconds}
    return jwt.encode(claims, secret, algorithm=ALGORITHM)


@dataclass(frozen=True)
class Grant:
    """What a valid token allows: reading the stream until ``expires_at`` (epoch seconds, leeway included)."""

    subject: str
    expires_at: float


def check_token(token: str | None, secret: str, stream: str, *, leeway_seconds: int = LEEWAY_SECONDS) -> Grant:
    """The grant of ``token``, or ``AuthError`` unless it is signed with ``secret``, unexpired and grants
    ``stream``. An expired token is resumable (``TOKEN_EXPIRED``: the client gets a fresh one and
    resumes); any other failure is terminal."""
    if not token:
        raise AuthError(CloseCode.AUTH_FAILED, "token required")
    try:
        # The signature and the required claims (and ``sub`` a string, PyJWT's default) by PyJWT; the time
        # claims below, once their types are known: a malformed token is refused as such (4401), never
        # taken for an expired one (4409, which the client answers with a fresh token and a resume).
        claims = jwt.decode(token, secret, algorithms=[ALGORITHM],
                            options={"require": ["exp"], "verify_exp": False, "verify_nbf": False,
                                     "verify_iat": False})
    except jwt.InvalidTokenError as error:
        raise AuthError(CloseCode.AUTH_FAILED, f"invalid token: {error}") from None
    problem = malformed_claim(claims)
    if problem is not None:
        raise AuthError(CloseCode.AUTH_FAILED, f"invalid token: {problem}")
    now = time.time()
    if claims["exp"] + leeway_seconds <= now:
        raise AuthError(CloseCode.TOKEN_EXPIRED, "token expired")
    for claim in ("nbf", "iat"):
        if claims.get(claim, now) > now + leeway_seconds:
            raise AuthError(CloseCode.AUTH_FAILED, f"invalid token: not yet valid ({claim})")
    granted = claims.get(STREAMS_CLAIM)
    if granted is None or not (stream in granted or "*" in granted):
        raise AuthError(CloseCode.FORBIDDEN_STREAM, f"token does not grant stream {stream!r}")
    subject = claims.get("sub")
    return Grant(subject=subject if isinstance(subject, str) else "", expires_at=float(claims["exp"]) + leeway_seconds)


def malformed_claim(claims: Mapping[str, Any]) -> str | None:
    """What makes a signed token's claims malformed, or None: the NumericDate claims not numbers, or
    ``streams`` (when present) not a list of strings."""
    for claim in NUMERIC_DATE_CLAIMS:
        value = claims.get(claim)
        if claim in claims and (isinstance(value, bool) or not isinstance(value, (int, float))):
            return f"the {claim!r} claim must be a number, not {type(value).__name__}"
    granted = claims.get(STREAMS_CLAIM)
    if STREAMS_CLAIM in claims and not (isinstance(granted, list) and all(isinstance(s, str) for s in granted)):
        return f"the {STREAMS_CLAIM!r} claim must be a list of strings"
    return None
