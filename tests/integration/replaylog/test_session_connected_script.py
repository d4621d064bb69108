"""A session marked connected through ``lua/session_connected.lua`` on a real Redis: its fields and TTL as the
two commands it replaces set them, for a batch of sessions, and again on a server that lost its scripts."""

from __future__ import annotations

import asyncio

import redis as redis_lib

from sparkwire.replaylog.port import ConnectRecord
from sparkwire.replaylog.redis_url import connect_async
from sparkwire.replaylog.sessions import RedisSessionRecords, session_key
from sparkwire_harness.stack import RedisServer


def test_connected_sessions_get_their_fields_and_ttl_even_after_the_scripts_are_flushed(
        redis_server: RedisServer, redis: redis_lib.Redis, unique_name: str) -> None:
    records = [ConnectRecord(f"{unique_name}-{n}", "metrics", f"user-{n}", 1_700_000_000_000 + n) for n in range(5)]

    async def connect_twice() -> None:
        client = connect_async(redis_server.url, max_connections=2)
        try:
            sessions = RedisSessionRecords(client)
            await sessions.connected(records[:3], pod="gw-a", ttl_seconds=600)
            await client.script_flush()  # a restarted or failed-over server holds no scripts
            await sessions.connected(records[3:], pod="gw-b", ttl_seconds=900)
        finally:
            await client.aclose()

    asyncio.run(connect_twice())
    for n, record in enumerate(records):
        key = session_key(record.session_id, record.stream)
        assert redis.hgetall(key) == {b"pod": b"gw-a" if n < 3 else b"gw-b",
                                      b"connected_ms": str(record.connected_ms).encode(),
                                      b"stream": b"metrics", b"subject": record.subject.encode()}
        assert (600 if n < 3 else 900) - 5 < redis.ttl(key) <= (600 if n < 3 else 900)
