"""Acks are written in batches: one pipeline per flush, the newest ack per session wins, a pod's pending
ack is visible to its own loads, and one session can be flushed on its own (a connection's end)."""

from __future__ import annotations

import asyncio

import redis.asyncio as redis_async

from sparkwire.gateway.sessions import SessionPosition, SessionStore, session_key
from sparkwire.stack import RedisServer


def test_acks_are_flushed_in_batches_newest_first_and_one_session_on_demand(
    redis_server: RedisServer, unique_name: str
) -> None:
    sync = redis_server.client(decode_responses=True)

    async def run() -> None:
        client = redis_async.Redis.from_url(redis_server.url)
        store = SessionStore(client, ttl_seconds=60, pod="pod-a", flush_interval_s=3600)
        for n in range(300):
            store.acked(f"s{n % 100}", unique_name, SessionPosition("e1", n, duplicates=n % 3))
        assert sync.exists(session_key("s1", unique_name)) == 0, "nothing written before a flush"
        assert await store.load("s1", unique_name) == SessionPosition("e1", 201, duplicates=0)
        await store.flush(only=("s2", unique_name))
        assert sync.hget(session_key("s2", unique_name), "seq") == "202"
        assert sync.exists(session_key("s3", unique_name)) == 0
        await store.flush()
        for n in range(200, 300):
            stored = sync.hgetall(session_key(f"s{n % 100}", unique_name))
            assert (stored["seq"], stored["duplicates"], stored["pod"]) == (str(n), str(n % 3), "pod-a")
            assert 0 < sync.ttl(session_key(f"s{n % 100}", unique_name)) <= 60
        await client.aclose()

    asyncio.run(run())
