"""Every few seconds, the Redis primary's replication as metrics: replicas online, their lag, and primary changes.

The gateway's client reaches the primary (a ``redis+sentinel://`` URL's client follows failovers), so its
``INFO replication`` is the primary's. A failover shows as a new ``master_replid``: a promoted replica starts a
new replication id. This is monitoring only: a failed poll counts a Redis error and is tried again next
period, never ending the task or the pod (the hubs and readiness already report an unreachable Redis); the
warning is logged once per streak of failures, not every period.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from sparkwire.gateway import metrics
from sparkwire.replaylog.replication import ReplicationStatus

log = logging.getLogger(__name__)

POLL_INTERVAL_S = 5.0
# INFO is answered from memory; a primary that takes longer is busy or gone, and the next poll asks again.
POLL_TIMEOUT_S = 2.0


class ReplicationWatch:
    def __init__(self, read: Callable[[], Awaitable[ReplicationStatus]], *, interval_s: float = POLL_INTERVAL_S,
                 timeout_s: float = POLL_TIMEOUT_S) -> None:
        self.read = read  # LogBackend.replication: INFO replication on Redis
        self.interval_s = interval_s
        self.timeout_s = timeout_s
        self.last: ReplicationStatus | None = None
        self._failing = False

    def observe(self, status: ReplicationStatus) -> None:
        """Export ``status``; a replication id other than the last one seen is a primary change (the first
        one seen is none: this pod does not know what came before it)."""
        metrics.REDIS_REPLICAS_CONNECTED.set(status.replicas_connected)
        metrics.REDIS_REPLICATION_LAG_BYTES.set(status.lag_bytes)
        metrics.REDIS_REPLICATION_LAG_SECONDS.set(status.lag_seconds)
        previous = self.last
        if previous is not None and status.master_replid and status.master_replid != previous.master_replid:
            metrics.REDIS_PRIMARY_CHANGES.inc()
            log.warning("redis primary changed", extra={"fields": {
                "event": "redis_primary_changed", "oldReplid": previous.master_replid,
                "newReplid": status.master_replid, "replicas": status.replicas_connected}})
        self.last = status

    async def poll(self) -> ReplicationStatus:
        async with asyncio.timeout(self.timeout_s):
            status = await self.read()
        self.observe(status)
        return status

    async def run(self) -> None:
        """Poll every ``interval_s`` until cancelled."""
        while True:
            try:
                await self.poll()
            except asyncio.CancelledError:
                raise
            except Exception as error:  # any failure (NOPERM, a timeout, a reply it cannot read) waits a period
                metrics.REDIS_ERRORS.labels(operation="info_replication").inc()
                if not self._failing:
                    self._failing = True
                    log.warning("redis replication status unavailable", extra={"fields": {
                        "error": f"{type(error).__name__}: {error}"}})
            else:
                if self._failing:
                    self._failing = False
                    log.info("redis replication status available again")
            await asyncio.sleep(self.interval_s)
