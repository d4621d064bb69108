"""Signed tokens: JWT HS256 (PyJWT), expiry required, the streams a client may read in a claim."""

from __future__ import annotations

from dataclasses import dataclass

import jwt

from sparkwire.protocol.close_codes import CloseCode

STREAMS_CLAIM = "streams"
ALGORITHM = "HS256"
# Clock skew tolerated between the token issuer and the gateway, at the hello and while connected.
LEEWAY_SECONDS = 5
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
        claims = jwt.decode(token, secret, algorithms=[ALGORITHM], options={"require": ["exp"]},
                            leeway=leeway_seconds)
    except jwt.ExpiredSignatureError:
        raise AuthError(CloseCode.TOKEN_EXPIRED, "token expired") from None
    except jwt.InvalidTokenError as error:
        raise AuthError(CloseCode.AUTH_FAILED, f"invalid token: {error}") from None
    granted = claims.get(STREAMS_CLAIM)
    if not isinstance(granted, list) or not (stream in granted or "*" in granted):
        raise AuthError(CloseCode.FORBIDDEN_STREAM, f"token does not grant stream {stream!r}")
    subject = claims.get("sub")
    return Grant(subject=subject if isinstance(subject, str) else "", expires_at=float(claims["exp"]) + leeway_seconds)
