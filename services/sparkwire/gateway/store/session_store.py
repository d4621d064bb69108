"""Client sessions: the last position each client acknowledged, shared by every pod through the store
(``replaylog.port.SessionRecords``; on Redis, hashes: ``replaylog/sessions.py``).

Acks are not written one by one: every client acks about once a second, and one store call per ack per
client costs more CPU than delivering the entries (and exhausts connection pools when acks arrive
together). The latest ack per session is kept in memory and ``run()`` writes the changed ones in one
round trip every ``flush_interval_s``; a connection's last ack and a draining pod's are flushed at once.
A SIGKILLed pod loses at most one interval of acks — positions clients hold in their cursors anyway.
The TTL is set at connect and at a connection's end; while it stays connected its acks renew it only every
quarter of the TTL (``ttl_refresh_due``): an EXPIRE per ack was a third of the flush's cost. The handshake's
lookups and "connected" writes of clients connecting together share round trips (``batched.Batched``).
"""

from __future__ import annotations

import asyncio
import logging
import time

from sparkwire.gateway import metrics
from sparkwire.gateway.store.batched import Batched
from sparkwire.replaylog.port import (
    UNAVAILABLE,
    AckRecord,
    ConnectRecord,
    SessionLookup,
    SessionPosition,
    SessionRecords,
)

log = logging.getLogger(__name__)


def _now_ms() -> int:
    return int(time.time() * 1000)


class SessionStore:
    def __init__(self, records: SessionRecords, *, ttl_seconds: int, pod: str,
                 flush_interval_s: float = 0.25) -> None:
        self.records = records
        self.ttl_seconds = ttl_seconds
        self.pod = pod
        self.flush_interval_s = flush_interval_s
        # (session, stream) -> (position, ack time, subject, renew the TTL): acks not written yet.
        self._pending: dict[tuple[str, str], tuple[SessionPosition, int, str, bool]] = {}
        self._lookups: Batched[tuple[str, str], SessionLookup] = Batched(records.lookup)
        self._connects: Batched[ConnectRecord, None] = Batched(self._write_connected)

    def ttl_refresh_due(self, refreshed_monotonic: float) -> bool:
        """Whether a session whose TTL was last set at ``refreshed_monotonic`` should renew it now."""
        return time.monotonic() - refreshed_monotonic >= self.ttl_seconds / 4

    async def lookup(self, session_id: str, stream: str) -> SessionLookup:
        """The subject the session was issued to (``""`` with auth off; None if no pod knows the id: never
        issued, or expired) and its last ack (None before the first), in one round trip: every resuming
        client asks, and after a pod is lost thousands ask at once."""
        pending = self._pending.get((session_id, stream))
        if pending is not None:  # acked on this pod a moment ago, not written yet
            return pending[2], pending[0]
        return await self._lookups((session_id, stream))

    async def connected(self, session_id: str, stream: str, subject: str = "") -> None:
        await self._connects(ConnectRecord(session_id, stream, subject, _now_ms()))

    async def _write_connected(self, records: list[ConnectRecord]) -> list[None]:
        await self.records.connected(records, pod=self.pod, ttl_seconds=self.ttl_seconds)
        return [None] * len(records)

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
        acks = [AckRecord(session_id, stream, position, updated_ms, subject, refresh_ttl or only is not None)
                for (session_id, stream), (position, updated_ms, subject, refresh_ttl) in batch.items()]
        try:
            await self.records.write(acks, pod=self.pod, ttl_seconds=self.ttl_seconds)
        except UNAVAILABLE:
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
                except UNAVAILABLE as error:
                    log.warning("session flush failed", extra={"fields": {"error": str(error)}})
        finally:
            if self._pending:
                try:
                    await asyncio.shield(self.flush())
                except UNAVAILABLE as error:
                    log.warning("last session flush failed", extra={"fields": {"error": str(error)}})


__all__ = ["SessionPosition", "SessionStore"]
