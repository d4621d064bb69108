"""When the client reconnects after a connection ends, and after how long (docs/protocol.md, "Resume").

Pure: the asyncio loop in ``connection.py`` asks ``next_step`` what to do and sleeps the delay.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from sparkwire.protocol.close_codes import CloseCode, is_resumable

# The closes the client makes itself: after a gap it closes normally and resumes at once, since the
# server is healthy and only this connection's stream of seqs is broken.
CLIENT_GAP_CLOSE = int(CloseCode.NORMAL)
# What the client reports when the server's frame made no sense: a protocol error (RFC 6455). Terminal,
# since reconnecting to the same server would get the same frame.
CLIENT_PROTOCOL_ERROR_CLOSE = 1002
# No close frame arrived: the TCP connection dropped (RFC 6455 "abnormal closure").
ABNORMAL_CLOSURE = 1006


class TerminalClose(Exception):
    """The connection ended with a close code the client must not retry (docs/protocol.md close table)."""

    def __init__(self, code: int, reason: str) -> None:
        try:
            name = CloseCode(code).name.lower()
        except ValueError:
            name = "unknown"
        super().__init__(f"terminal close {code} ({name}): {reason}")
        self.code = code
        self.name = name
        self.reason = reason


@dataclass(frozen=True)
class ReconnectPolicy:
    """Exponential backoff with full jitter: attempt ``n`` waits a uniform time in
    ``[0, min(max_delay_s, initial_delay_s * 2**n)]``, so clients dropped together do not return together.

    The protocol suggests a 30 s cap for browsers at scale; a few seconds suits tests and local tools.
    """

    initial_delay_s: float = 0.5
    max_delay_s: float = 5.0

    def delay(self, attempt: int, rng: random.Random) -> float:
        ceiling = min(self.max_delay_s, self.initial_delay_s * 2 ** min(attempt, 62))
        return rng.uniform(0.0, ceiling)


@dataclass(frozen=True)
class NextStep:
    """``reconnect`` after ``delay_s`` (and the next failure is attempt ``attempt``), or stop: terminal."""

    reconnect: bool
    delay_s: float
    attempt: int


def next_step(
    code: int, *, attempt: int, welcomed: bool, policy: ReconnectPolicy, rng: random.Random, client_gap: bool = False,
    can_refresh_token: bool = False,
) -> NextStep:
    """What to do after a connection ended with ``code``.

    ``attempt`` counts the connections that failed in a row before this one; a connection that got its
    ``welcome`` worked, so the count starts over. ``client_gap``: the client closed because of a seq gap.
    ``can_refresh_token``: the client has a way to get a fresh token; without one an expired token is as
    final as a rejected one.
    """
    if client_gap:
        return NextStep(reconnect=True, delay_s=0.0, attempt=0)
    if code == CloseCode.TOKEN_EXPIRED and not can_refresh_token:
        return NextStep(reconnect=False, delay_s=0.0, attempt=attempt)
    if not is_resumable(code):
        return NextStep(reconnect=False, delay_s=0.0, attempt=attempt)
    if welcomed:
        attempt = 0
    # A draining pod (1001) is not overloaded: another pod can take the client at once; nor is one that
    # only found the token expired.
    at_once = code in (CloseCode.GOING_AWAY, CloseCode.TOKEN_EXPIRED) and attempt == 0
    delay = 0.0 if at_once else policy.delay(attempt, rng)
    return NextStep(reconnect=True, delay_s=delay, attempt=attempt + 1)
