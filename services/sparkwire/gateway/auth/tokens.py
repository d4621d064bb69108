"""Signed tokens: JWT (PyJWT), HS256 with a shared secret or RS256/ES256 with an identity provider's keys
(``keys.py``), expiry required, the issuer and audience checked when configured, the streams a client may read
in a claim, and the rows of them it may read in another (``scope``: stream -> filter, docs/protocol.md "The
scope from the token"); both claims' names configurable."""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import jwt

from sparkwire.gateway.auth.keys import HmacKey, KeySource, KeyUnavailable
from sparkwire.protocol.close_codes import CloseCode
from sparkwire.protocol.filter_form import Filter, FilterError, filter_document
from sparkwire.protocol.scope import parse_scope_claim, scope_for

STREAMS_CLAIM = "streams"
SCOPE_CLAIM = "scope"
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


def issue_token(secret: str, streams: list[str], ttl_seconds: int, *, subject: str = "client", now: int,
                scope: Mapping[str, Filter] | None = None) -> str:
    """A token for ``streams`` (``["*"]`` for all) valid ``ttl_seconds`` from ``now`` (for tools and tests),
    restricted to ``scope`` (stream or ``"*"`` -> filter) when given."""
    claims: dict[str, object] = {"sub": subject, STREAMS_CLAIM: streams, "iat": now, "exp": now + ttl_seconds}
    if scope is not None:
        claims[SCOPE_CLAIM] = {stream: filter_document(f) for stream, f in scope.items()}
    return jwt.encode(claims, secret, algorithm=ALGORITHM)


@dataclass(frozen=True)
class Verifier:
    """How tokens are checked: the keys, the issuer and audience required (empty: not checked), and the
    claims holding the streams and the scope."""

    keys: KeySource
    issuer: str = ""
    audience: str = ""
    streams_claim: str = STREAMS_CLAIM
    scope_claim: str = SCOPE_CLAIM


# What a gateway checks tokens with: a shared secret (HS256, the default claims), a Verifier, or "" (auth off).
Auth = str | Verifier


async def verify_token(token: str | None, auth: Auth, stream: str) -> Grant:
    """:func:`check_token`, once the key source had the chance to fetch the token's key (off the event loop)."""
    if token and isinstance(auth, Verifier):
        await auth.keys.prepare(token)
    return check_token(token, auth, stream)


@dataclass(frozen=True)
class Grant:
    """What a valid token allows: reading the stream until ``expires_at`` (epoch seconds, leeway included),
    only the rows ``scope`` admits (None: every row)."""

    subject: str
    expires_at: float
    scope: Filter | None = None


def check_token(token: str | None, secret: Auth, stream: str, *, leeway_seconds: int = LEEWAY_SECONDS) -> Grant:
    """The grant of ``token``, or ``AuthError`` unless it is signed with ``secret`` (a shared secret, or the
    keys of a ``Verifier`` as they are held: :func:`verify_token` fetches first), from the configured issuer
    for the configured audience, unexpired and grants ``stream``. An expired token is resumable
    (``TOKEN_EXPIRED``: the client gets a fresh one and resumes); any other failure is terminal."""
    if not token:
        raise AuthError(CloseCode.AUTH_FAILED, "token required")
    verifier = secret if isinstance(secret, Verifier) else Verifier(HmacKey(secret))
    try:
        key, algorithms = verifier.keys.key_for(token)
    except KeyUnavailable as error:
        raise AuthError(CloseCode.AUTH_FAILED, f"invalid token: {error}") from None
    required = ["exp"] + (["iss"] if verifier.issuer else []) + (["aud"] if verifier.audience else [])
    try:
        # The signature and the required claims (and ``sub`` a string, PyJWT's default) by PyJWT; the time
        # claims below, once their types are known: a malformed token is refused as such (4401), never
        # taken for an expired one (4409, which the client answers with a fresh token and a resume).
        claims = jwt.decode(token, key, algorithms=algorithms, issuer=verifier.issuer or None,
                            audience=verifier.audience or None,
                            options={"require": required, "verify_exp": False, "verify_nbf": False,
                                     "verify_iat": False})
    except jwt.InvalidTokenError as error:
        raise AuthError(CloseCode.AUTH_FAILED, f"invalid token: {error}") from None
    problem = malformed_claim(claims, verifier.streams_claim)
    if problem is not None:
        raise AuthError(CloseCode.AUTH_FAILED, f"invalid token: {problem}")
    now = time.time()
    if claims["exp"] + leeway_seconds <= now:
        raise AuthError(CloseCode.TOKEN_EXPIRED, "token expired")
    for claim in ("nbf", "iat"):
        if claims.get(claim, now) > now + leeway_seconds:
            raise AuthError(CloseCode.AUTH_FAILED, f"invalid token: not yet valid ({claim})")
    granted = claims.get(verifier.streams_claim)
    if granted is None or not (stream in granted or "*" in granted):
        raise AuthError(CloseCode.FORBIDDEN_STREAM, f"token does not grant stream {stream!r}")
    subject = claims.get("sub")
    scope = None
    if verifier.scope_claim in claims:
        try:
            scope = scope_for(parse_scope_claim(claims[verifier.scope_claim]), stream)
        except FilterError as error:  # a malformed scope makes the token malformed
            raise AuthError(CloseCode.AUTH_FAILED,
                            f"invalid token: the {verifier.scope_claim!r} claim: {error}") from None
    return Grant(subject=subject if isinstance(subject, str) else "",
                 expires_at=float(claims["exp"]) + leeway_seconds, scope=scope)


def malformed_claim(claims: Mapping[str, Any], streams_claim: str = STREAMS_CLAIM) -> str | None:
    """What makes a signed token's claims malformed, or None: the NumericDate claims not numbers, or
    the streams claim (when present) not a list of strings."""
    for claim in NUMERIC_DATE_CLAIMS:
        value = claims.get(claim)
        if claim in claims and (isinstance(value, bool) or not isinstance(value, (int, float))):
            return f"the {claim!r} claim must be a number, not {type(value).__name__}"
    granted = claims.get(streams_claim)
    if streams_claim in claims and not (isinstance(granted, list) and all(isinstance(s, str) for s in granted)):
        return f"the {streams_claim!r} claim must be a list of strings"
    return None
