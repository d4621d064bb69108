"""Client sessions in Redis hashes: the last position a client acknowledged, shared by every pod.

Key ``sparkwire:session:{<id>}:<stream>``: the hash tag is the session id, so sessions spread over a
Redis Cluster instead of piling onto the stream's slot.

Acks are not written one by one: every client acks about once a second, and one Redis call per ack per
client costs more CPU than delivering the entries (and exhausts connection pools when acks arrive
together). The latest ack per session is kept in memory and ``run()`` writes the changed ones in one
pipeline every ``flush_interval_s``; a connection's last ack and a draining pod's are flushed at once.
A SIGKILLed pod loses at most one interval of acks — positions clients hold in their cursors anyway.
The TTL is set at connect and at a connection's end; while it stays connected its acks renew it only every
quarter of the TTL (``ttl_refresh_due``): an EXPIRE per ack was a third of the flush's cost.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass

import redis.asyncio as redis_async
from redis.exceptions import RedisError

from sparkwire.gateway import metrics
from sparkwire.replaylog.keys import DEFAULT_PREFIX

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SessionPosition:
    """The last ack of a session, and the duplicate and gap counts its client reported with it."""

    epoch: str
    seq: int
    duplicates: int = 0
    gaps: int = 0


def session_key(session_id: str, stream: str, prefix: str = DEFAULT_PREFIX) -> str:
    return f"{prefix}:session:{{{session_id}}}:{stream}"


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _now_ms() -> int:
    return int(time.time() * 1000)


class SessionStore:
    def __init__(self, client: redis_async.Redis, *, ttl_seconds: int, pod: str,
                 flush_interval_s: float = 0.25) -> None:
        self.client = client
        self.ttl_seconds = ttl_seconds
        self.pod = pod
        self.flush_interval_s = flush_interval_s
        # (session, stream) -> (position, ack time, subject, renew the TTL): acks not written yet.
        self._pending: dict[tuple[str, str], tuple[SessionPosition, int, str, bool]] = {}

    def ttl_refresh_due(self, refreshed_monotonic: float) -> bool:
        """Whether a session whose TTL was last set at ``refreshed_monotonic`` should renew it now."""
        return time.monotonic() - refreshed_monotonic >= self.ttl_seconds / 4

    async def lookup(self, session_id: str, stream: str) -> tuple[str | None, SessionPosition | None]:
        """The subject the session was issued to (``""`` with auth off; None if no pod knows the id: never
        issued, or expired) and its last ack (None before the first), in one round trip: every resuming
        client asks, and after a pod is lost thousands ask at once."""
        pending = self._pending.get((session_id, stream))
        if pending is not None:  # acked on this pod a moment ago, not written yet
            return pending[2], pending[0]
        fields = ["subject", "epoch", "seq", "duplicates", "gaps"]
        subject, epoch, seq, duplicates, gaps = await self.client.hmget(session_key(session_id, stream), fields)
        if subject is None:  # every pod writes the subject when it issues the id
            return None, None
        position = None if epoch is None or seq is None else SessionPosition(
            epoch=_text(epoch), seq=int(seq), duplicates=int(duplicates or 0), gaps=int(gaps or 0))
        return _text(subject), position

    async def connected(self, session_id: str, stream: str, subject: str = "") -> None:
        key = session_key(session_id, stream)
        async with self.client.pipeline(transaction=False) as pipe:  # one round trip; no reader needs both at once
            pipe.hset(key, mapping={"pod": self.pod, "connected_ms": _now_ms(), "stream": stream,
                                    "subject": subject})
            pipe.expire(key, self.ttl_seconds)
            await pipe.execute()

    def acked(self, session_id: str, stream: str, position: SessionPosition, subject: str = "",
              *, refresh_ttl: bool = True) -> None:
        """Record an ack; it reaches Redis with the next flush, renewing the TTL if this ack or an earlier
        one not yet written asks to."""
        earlier = self._pending.get((session_id, stream))
        refresh_ttl = refresh_ttl or (earlier is not None and earlier[3])
        self._pending[(session_id, stream)] = (position, _now_ms(), subject, refresh_ttl)

    async def flush(self, only: tuple[str, str] | None = None) -> None:
        """Write pending acks (all, or one session's: a connection's end, which also renews its TTL) in one
        round trip; kept for the next try on error."""
        if only is not None:
            batch = {only: self._pending.pop(only)} if only in self._pending else {}
        else:
            batch, self._pending = self._pending, {}
        if not batch:
            return
        try:
            async with self.client.pipeline(transaction=False) as pipe:
                for (session_id, stream), (position, updated_ms, subject, refresh_ttl) in batch.items():
                    key = session_key(session_id, stream)
                    pipe.hset(key, mapping={
                        "epoch": position.epoch, "seq": position.seq, "duplicates": position.duplicates,
                        "gaps": position.gaps, "pod": self.pod, "updated_ms": updated_ms, "subject": subject,
                    })
                    if refresh_ttl or only is not None:
                        pipe.expire(key, self.ttl_seconds)
                await pipe.execute()
        except (RedisError, OSError):
            metrics.REDIS_ERRORS.labels(operation="session_flush").inc()
            for item, value in batch.items():  # newer acks that arrived meanwhile win
                self._pending.setdefault(item, value)
            raise

    async def run(self) -> None:
        """Flush pending acks every ``flush_interval_s`` until cancelled (then once more)."""
        try:
            while True:
                await asyncio.sleep(self.flush_interval_s)
                try:
                    await self.flush()
                except (RedisError, OSError) as error:
                    log.warning("session flush failed", extra={"fields": {"error": str(error)}})
        finally:
            if self._pending:
                try:
                    await asyncio.shield(self.flush())
                except (RedisError, OSError) as error:
                    log.warning("last session flush failed", extra={"fields": {"error": str(error)}})
