"""The log port on Redis (``port.LogBackend``): what gateway pods run on. One asyncio client serves every
stream's reader, the sessions, the health check and the replication poll."""

from __future__ import annotations

import logging

import redis.asyncio as redis_async
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialWithJitterBackoff

from sparkwire.replaylog.async_reader import AsyncReplayLogReader
from sparkwire.replaylog.keys import StreamKeys
from sparkwire.replaylog.redis_url import FailoverFollower, connect_async
from sparkwire.replaylog.replication import ReplicationStatus, read_replication_async
from sparkwire.replaylog.sessions import RedisSessionRecords

log = logging.getLogger(__name__)


class RedisBackend:
    def __init__(self, client: redis_async.Redis) -> None:
        self.client = client
        self._sessions = RedisSessionRecords(client)
        self._follower = FailoverFollower(client)

    @classmethod
    def for_gateway(cls, url: str, *, pool_size: int, streams: int, timeout_s: float = 10.0) -> RedisBackend:
        """A pod's store: ``url`` (``redis://`` or ``redis+sentinel://``), ``pool_size`` connections for its
        clients' calls plus one per stream it follows; a connect or command not answered within
        ``timeout_s`` fails (and is retried)."""
        # Blocking pool: when every connection is busy (acks and hellos arriving together), wait for one
        # instead of failing the call, which would close clients with 4503.
        # Each stream's hub holds one connection in a blocking XREAD for good: on top of the pool for the
        # connections' calls, or a pod serving more streams than the pool size never gets ready.
        # Retry: a pooled connection that died with a Redis restart or failover fails its next command; every
        # command the gateway sends is a read or an idempotent HSET/EXPIRE, so it is resent on a new connection
        # (a few tries, ~50 ms apart, doubling) instead of closing a client with 4503.
        # A Sentinel URL (redis_url.py) gets a sentinel-managed pool with the same size, wait for a free
        # connection, health checks and Retry. What differs: every new connection first asks the sentinels for
        # the primary, and the Retry's tries (~0.4 s in all) do not outlast a failover (seconds): until the
        # sentinels name the new primary, hello and ack calls fail (clients are closed with 4503 and resume)
        # and the hubs' XREAD loops back off and read again, now from the new primary.
        # Socket timeouts: without them a command sent on a link gone silent (a Redis pod deleted, its address
        # dropping packets instead of refusing them) waits for TCP to give up, ~15 min: the kind suite once saw
        # a pod's clients get neither entries nor pings nor a close for that long, its readiness failing.
        client = connect_async(url, max_connections=pool_size + streams, timeout=5, health_check_interval=10,
                               socket_timeout=timeout_s, socket_connect_timeout=timeout_s, socket_keepalive=True,
                               retry=Retry(ExponentialWithJitterBackoff(base=0.05, cap=1.0), retries=3))
        return cls(client)

    def stream(self, name: str) -> AsyncReplayLogReader:
        return AsyncReplayLogReader(self.client, StreamKeys(name))

    @property
    def sessions(self) -> RedisSessionRecords:
        return self._sessions

    async def ping(self) -> None:
        await self.client.ping()

    async def replication(self) -> ReplicationStatus:
        """The primary's replication status, the sentinels asked first which node that is (a Sentinel URL):
        connections to a node they replaced are dropped, so the hubs' reads move to the new primary within
        a poll period of the failover instead of after the old one is demoted (``FailoverFollower``)."""
        if await self._follower.follow():
            log.warning("the sentinels name another primary: connections to the old one dropped",
                        extra={"fields": {"event": "redis_primary_followed"}})
        return await read_replication_async(self.client)

    async def close(self) -> None:
        await self.client.aclose()
