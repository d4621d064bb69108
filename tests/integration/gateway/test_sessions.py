"""Acks are written in batches: one pipeline per flush, the newest ack per session wins, a pod's pending
ack is visible to its own loads, and one session can be flushed on its own (a connection's end)."""

from __future__ import annotations

import asyncio
import time

import redis.asyncio as redis_async

from sparkwire.gateway.store.session_store import SessionPosition, SessionStore
from sparkwire.replaylog.sessions import RedisSessionRecords, session_key
from sparkwire_harness.stack import RedisServer


def test_acks_are_flushed_in_batches_newest_first_and_one_session_on_demand(
    redis_server: RedisServer, unique_name: str
) -> None:
    sync = redis_server.client(decode_responses=True)

    async def run() -> None:
        client = redis_async.Redis.from_url(redis_server.url)
        store = SessionStore(RedisSessionRecords(client), ttl_seconds=60, pod="pod-a", flush_interval_s=3600)
        for n in range(300):
            store.acked(f"s{n % 100}", unique_name, SessionPosition("e1", n, duplicates=n % 3))
        assert sync.exists(session_key("s1", unique_name)) == 0, "nothing written before a flush"
        assert await store.lookup("s1", unique_name) == ("", SessionPosition("e1", 201, duplicates=0))
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


def test_acks_renew_the_ttl_only_when_asked_and_a_connections_end_always_does(
    redis_server: RedisServer, unique_name: str
) -> None:
    sync = redis_server.client(decode_responses=True)
    key = session_key("s1", unique_name)

    async def run() -> None:
        client = redis_async.Redis.from_url(redis_server.url)
        store = SessionStore(RedisSessionRecords(client), ttl_seconds=600, pod="pod-a", flush_interval_s=3600)
        await store.connected("s1", unique_name)
        sync.expire(key, 100)  # as if set long ago
        store.acked("s1", unique_name, SessionPosition("e1", 1), refresh_ttl=False)
        await store.flush()
        assert sync.hget(key, "seq") == "1" and sync.ttl(key) <= 100, "an ack not asked to renew left the TTL"
        store.acked("s1", unique_name, SessionPosition("e1", 2), refresh_ttl=True)
        store.acked("s1", unique_name, SessionPosition("e1", 3), refresh_ttl=False)  # the earlier ack's ask holds
        await store.flush()
        assert sync.hget(key, "seq") == "3" and sync.ttl(key) > 500
        sync.expire(key, 100)
        store.acked("s1", unique_name, SessionPosition("e1", 4), refresh_ttl=False)
        await store.flush(only=("s1", unique_name))  # a connection's end
        assert sync.hget(key, "seq") == "4" and sync.ttl(key) > 500
        assert store.ttl_refresh_due(time.monotonic() - 151) and not store.ttl_refresh_due(time.monotonic() - 10)
        await client.aclose()

    asyncio.run(run())


def test_one_lookup_tells_who_a_session_was_issued_to_and_its_last_ack(
    redis_server: RedisServer, unique_name: str
) -> None:
    async def run() -> list[object]:
        client = redis_async.Redis.from_url(redis_server.url)
        store = SessionStore(RedisSessionRecords(client), ttl_seconds=600, pod="pod-a", flush_interval_s=3600)
        found: list[object] = [await store.lookup("never-issued", unique_name)]
        await store.connected("s1", unique_name, subject="alice")
        found.append(await store.lookup("s1", unique_name))  # issued, nothing acked yet
        store.acked("s1", unique_name, SessionPosition("e1", 7, gaps=1), "alice")
        await store.flush()
        # nothing pending on this pod: read from Redis
        other_pod = SessionStore(RedisSessionRecords(client), ttl_seconds=600, pod="pod-b")
        found.append(await other_pod.lookup("s1", unique_name))
        await client.aclose()
        return found

    assert asyncio.run(run()) == [(None, None), ("alice", None), ("alice", SessionPosition("e1", 7, gaps=1))]
