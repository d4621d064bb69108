"""The gateway's asyncio connections take a reply hiredis already holds without redis-py's wait
(replaylog/packing.py, ``BufferedReplies``): on a real Redis, the same replies as redis-py's own connections
give, reply by reply, for every kind of reply (errors in place, a reply larger than one socket read), under
RESP2 and RESP3; a lost connection still fails the call; and the shortcut is really taken."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
import redis.asyncio as redis_async
from redis.asyncio.connection import AbstractConnection
from redis.exceptions import ConnectionError, ResponseError

from sparkwire.replaylog.packing import BufferedReplies
from sparkwire.replaylog.redis_url import connect_async
from sparkwire_harness.stack import RedisServer

BIG = "x" * 300_000  # several of the parser's 64 KiB socket reads


def _commands(key: str) -> list[tuple[Any, ...]]:
    return [
        ("SET", f"{key}:s", "value"), ("GET", f"{key}:s"), ("GET", f"{key}:missing"),
        ("HSET", f"{key}:h", "seq", 12, "epoch", "e1"), ("HMGET", f"{key}:h", "seq", "nope", "epoch"),
        ("HGETALL", f"{key}:h"), ("INCR", f"{key}:s"),  # an error in place: not an integer
        ("SET", f"{key}:big", BIG), ("GET", f"{key}:big"), ("EXPIRE", f"{key}:h", 60),
        ("XADD", f"{key}:x", "*", "f", "v"), ("XLEN", f"{key}:x"), ("EVAL", "return {1, 'two', {3}}", 0),
        ("EVALSHA", "0" * 40, 0),  # no such script: an error in place
        ("PING",),
    ]


async def _replies(client: redis_async.Redis, key: str) -> list[Any]:
    async with client.pipeline(transaction=False) as pipe:
        for command in _commands(key):
            pipe.execute_command(*command)
        replies = await pipe.execute(raise_on_error=False)
    return [type(reply).__name__ + ":" + str(reply) if isinstance(reply, ResponseError) else reply
            for reply in replies]


def _normalized(replies: list[Any]) -> list[Any]:
    """XADD's id differs per run."""
    return [reply if index != 10 else "id" for index, reply in enumerate(replies)]


@pytest.mark.parametrize("protocol", [2, 3])
def test_a_pipeline_gets_the_replies_redis_py_gets(redis_server: RedisServer, unique_name: str,
                                                   protocol: int) -> None:
    async def both() -> tuple[list[Any], list[Any], list[Any]]:
        ours = connect_async(redis_server.url, max_connections=2, timeout=5, protocol=protocol, socket_timeout=5,
                             health_check_interval=10)
        plain = redis_async.Redis.from_url(redis_server.url, protocol=protocol, socket_timeout=5)
        try:
            assert issubclass(ours.connection_pool.connection_class, BufferedReplies)
            assert not issubclass(plain.connection_pool.connection_class, BufferedReplies)
            first = await _replies(ours, f"{unique_name}:a")
            second = await _replies(plain, f"{unique_name}:b")
            again = await _replies(ours, f"{unique_name}:c")  # the same connection, after errors in place
            return first, second, again
        finally:
            await ours.aclose()
            await plain.aclose()

    ours, plain, again = asyncio.run(both())
    assert _normalized(ours) == _normalized(plain) == _normalized(again)
    assert ours[8] == BIG.encode() and ours[2] is None and ours[6].startswith("ResponseError:")
    assert ours[13].startswith("NoScriptError:")


def test_most_replies_of_a_pipeline_are_taken_without_redis_py_s_read(redis_server: RedisServer, unique_name: str,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    reads = 0
    slow_read: Callable[..., Awaitable[Any]] = AbstractConnection.read_response

    async def counted(self: AbstractConnection, *args: Any, **kwargs: Any) -> Any:
        nonlocal reads
        reads += 1
        return await slow_read(self, *args, **kwargs)

    monkeypatch.setattr(AbstractConnection, "read_response", counted)

    async def flush() -> list[Any]:
        client = connect_async(redis_server.url, max_connections=2, timeout=5, socket_timeout=5)
        try:
            async with client.pipeline(transaction=False) as pipe:
                for n in range(200):
                    pipe.execute_command("HSET", f"{unique_name}:{n}", "seq", n, "epoch", "e1")
                return list(await pipe.execute())
        finally:
            await client.aclose()

    replies = asyncio.run(flush())
    assert replies == [2] * 200
    assert 1 <= reads < 20  # the first reply waits for the socket (and a few more if it comes in parts)


def test_a_connection_lost_mid_pipeline_still_fails_the_call(redis_server: RedisServer, unique_name: str) -> None:
    async def killed() -> None:
        client = connect_async(redis_server.url, max_connections=2, timeout=5, socket_timeout=5)
        try:
            async with client.pipeline(transaction=False) as pipe:
                pipe.execute_command("SET", f"{unique_name}:k", "v")
                pipe.execute_command("QUIT")  # the server answers OK, then closes the connection
                pipe.execute_command("GET", f"{unique_name}:k")
                with pytest.raises(ConnectionError):
                    await pipe.execute()
            assert await client.get(f"{unique_name}:k") == b"v"  # a new connection from the pool
        finally:
            await client.aclose()

    asyncio.run(killed())
