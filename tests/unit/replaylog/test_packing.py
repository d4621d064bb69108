"""The gateway's asyncio Redis clients pack their commands with hiredis (replaylog/packing.py): the same bytes as
redis-py's own packer, for every kind of connection a URL names."""

from __future__ import annotations

import pytest
import redis.asyncio as redis_async
from redis.asyncio.connection import AbstractConnection, Connection, SSLConnection, UnixDomainSocketConnection
from redis.asyncio.sentinel import SentinelManagedConnection
from redis.exceptions import DataError

from sparkwire.replaylog.packing import BufferedReplies, HiredisPacking, _packed
from sparkwire.replaylog.redis_url import _AsyncFollowingConnection, connect_async

COMMANDS = [
    ("HSET", "sparkwire:session:{ab12}:metrics", "epoch", "e1", "seq", 123456789012, "duplicates", 0,
     "digest", b"\x00\xffbytes", "subject", "usér", "ratio", 0.25),
    ("XREAD", "COUNT", 1000, "BLOCK", 1000, "STREAMS", "sparkwire:{metrics}:log", "0-0"),
    ("CONFIG GET", "maxmemory"),  # a command name of two words is split, as redis-py does
    (b"SET", b"k", bytearray(b"v")),  # hiredis refuses a bytearray: redis-py's packer copies it
    ("SET", "k", memoryview(b"v")),
]


@pytest.mark.parametrize("url,kind", [
    ("redis://127.0.0.1:6399/0", Connection),
    ("rediss://127.0.0.1:6399/0", SSLConnection),
    ("unix:///tmp/redis.sock", UnixDomainSocketConnection),
])
def test_every_pool_of_a_url_packs_with_hiredis_and_keeps_its_connection_kind(url: str, kind: type) -> None:
    pool = connect_async(url, max_connections=2, timeout=5).connection_pool
    assert issubclass(pool.connection_class, HiredisPacking) and issubclass(pool.connection_class, kind)
    connection = pool.make_connection()
    python = Connection()
    for command in COMMANDS:
        assert b"".join(connection.pack_command(*command)) == b"".join(python.pack_command(*command))
    pipeline = b"".join(connection.pack_commands(COMMANDS))
    assert pipeline == b"".join(python.pack_commands(COMMANDS))


def test_a_sentinel_pool_packs_with_hiredis_too() -> None:
    client = connect_async("redis+sentinel://127.0.0.1:26390/main", max_connections=2, timeout=5)
    assert issubclass(client.connection_pool.connection_class, HiredisPacking)
    assert isinstance(client, redis_async.Redis)


def test_an_argument_hiredis_cannot_pack_is_a_data_error_as_with_redis_py() -> None:
    pool = connect_async("redis://127.0.0.1:6399/0", max_connections=2, timeout=5).connection_pool
    connection = pool.make_connection()
    for bad in (None, True):
        with pytest.raises(DataError):
            connection.pack_command("SET", "k", bad)  # type: ignore[arg-type]
        with pytest.raises(DataError):
            Connection().pack_command("SET", "k", bad)  # type: ignore[arg-type]


def test_buffered_replies_come_right_before_redis_py_s_own_read_so_every_wrapper_still_sees_each_reply() -> None:
    """A sentinel-managed connection (and ours, ``_AsyncFollowingConnection``) turns a failover's errors into
    connection errors in its ``read_response``; the shortcut for buffered replies must sit under it."""
    for kind in (Connection, SSLConnection, UnixDomainSocketConnection, _AsyncFollowingConnection):
        order = _packed(kind).__mro__
        assert order.index(BufferedReplies) == order.index(AbstractConnection) - 1
        assert order.index(kind) < order.index(BufferedReplies)
    following = _packed(_AsyncFollowingConnection).__mro__
    assert following.index(SentinelManagedConnection) < following.index(BufferedReplies)
