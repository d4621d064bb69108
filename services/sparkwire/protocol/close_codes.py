"""WebSocket close codes of the gateway protocol and whether a client should reconnect and resume.

The table is the one in docs/protocol.md; a test keeps the two in step, and another the browser
browser client's copy (client/js/sparkwire-client.js).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

# RFC 6455 caps a close frame's reason at 123 bytes of UTF-8 (125 minus the 2-byte code).
MAX_REASON_BYTES = 123


class CloseCode(IntEnum):
    NORMAL = 1000
    GOING_AWAY = 1001
    UNSUPPORTED_DATA = 1003
    POLICY_VIOLATION = 1008
    MESSAGE_TOO_BIG = 1009
    INTERNAL_ERROR = 1011
    PROTOCOL_VIOLATION = 4400
    AUTH_FAILED = 4401
    FORBIDDEN_STREAM = 4403
    UNKNOWN_STREAM = 4404
    TIMEOUT = 4408
    STREAM_RESET = 4409
    TOKEN_EXPIRED = 4419
    INVALID_FILTER = 4422
    OUTSIDE_SCOPE = 4423
    UNSUPPORTED_VERSION = 4426
    SLOW_CONSUMER = 4429
    REDIS_UNAVAILABLE = 4503

    @property
    def spec(self) -> CloseSpec:
        return CLOSE_SPECS[self]

    @property
    def resumable(self) -> bool:
        return CLOSE_SPECS[self].resumable

    @property
    def reason(self) -> str:
        return CLOSE_SPECS[self].reason

    @property
    def error_frame_first(self) -> bool:
        return CLOSE_SPECS[self].error_frame_first


@dataclass(frozen=True)
class CloseSpec:
    code: CloseCode
    resumable: bool
    reason: str
    """Default close-frame reason (short, fits ``MAX_REASON_BYTES``)."""
    when: str
    """When the server (or, for NORMAL, either side) uses it; documentation only."""
    error_frame_first: bool = False
    """Whether the server sends an ``error`` frame with the full reason just before closing: for every
    close the client caused (what it sent, did not send, or did not read), terminal or resumable, so it
    can say why; not for closes the server or its dependencies caused, which the client cannot fix."""


_SPECS = (
    CloseSpec(CloseCode.NORMAL, False, "normal closure", "either side ends the session on purpose"),
    CloseSpec(CloseCode.GOING_AWAY, True, "server going away", "the pod is draining or shutting down"),
    CloseSpec(CloseCode.UNSUPPORTED_DATA, False, "binary frames not supported", "the client sent a binary frame", True),
    CloseSpec(CloseCode.POLICY_VIOLATION, False, "origin not allowed", "the Origin header is not allowed", True),
    CloseSpec(CloseCode.MESSAGE_TOO_BIG, False, "frame too big", "a client frame exceeds the client frame limit", True),
    CloseSpec(CloseCode.INTERNAL_ERROR, True, "internal error", "an unexpected server error, a gap it could not heal"),
    CloseSpec(CloseCode.PROTOCOL_VIOLATION, False, "protocol violation", "a malformed or out-of-order client frame",
              True),
    CloseSpec(CloseCode.AUTH_FAILED, False, "authentication failed", "token missing, invalid or badly signed", True),
    CloseSpec(CloseCode.FORBIDDEN_STREAM, False, "stream forbidden", "the token does not grant this stream", True),
    CloseSpec(CloseCode.UNKNOWN_STREAM, False, "unknown stream", "stream name missing, invalid or not served", True),
    CloseSpec(CloseCode.TIMEOUT, True, "timeout", "no hello within the hello timeout, or no pong to a ping", True),
    CloseSpec(CloseCode.STREAM_RESET, True, "stream reset", "the stream's epoch changed while connected"),
    CloseSpec(CloseCode.TOKEN_EXPIRED, True, "token expired",
              "the token expired, at the hello or while connected (resume with a fresh token)", True),
    CloseSpec(CloseCode.INVALID_FILTER, False, "invalid filter",
              "hello.filter is malformed, unsupported, over a limit, or matches nothing", True),
    CloseSpec(CloseCode.OUTSIDE_SCOPE, False, "filter outside scope",
              "hello.filter asks for rows outside the token's scope for the stream", True),
    CloseSpec(CloseCode.UNSUPPORTED_VERSION, False, "unsupported protocol version", "hello.v is not supported", True),
    CloseSpec(CloseCode.SLOW_CONSUMER, True, "slow consumer", "the client fell too far behind live", True),
    CloseSpec(CloseCode.REDIS_UNAVAILABLE, True, "redis unavailable", "the replay log cannot be read"),
)
CLOSE_SPECS: dict[CloseCode, CloseSpec] = {spec.code: spec for spec in _SPECS}

# Codes a client may see without the server choosing them: 1005/1006 come from the browser when no
# close frame arrived (a dropped connection), 1012/1013 from proxies restarting or shedding load.
_TRANSIENT_STANDARD_CODES = frozenset({1005, 1006, 1012, 1013, 1014})


def is_resumable(code: int) -> bool:
    """Whether a client should reconnect (with backoff and jitter) and resume after ``code``.

    Codes outside the table count as resumable: a dropped connection is the common case, and backoff
    bounds the cost of retrying an unknown terminal code from a newer server.
    """
    if code in _TRANSIENT_STANDARD_CODES:
        return True
    try:
        return CloseCode(code).resumable
    except ValueError:
        return True


def close_reason(text: str) -> str:
    """``text`` cut to what fits a close frame, on a character boundary; the full text goes in an
    ``error`` frame sent just before the close."""
    encoded = text.encode("utf-8", "surrogatepass")
    if len(encoded) <= MAX_REASON_BYTES:
        return text
    return encoded[: MAX_REASON_BYTES - 3].decode("utf-8", "ignore") + "..."
