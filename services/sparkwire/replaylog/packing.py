"""Commands packed by hiredis for the asyncio clients, as redis-py's synchronous clients already do.

redis-py's asyncio ``Connection`` packs every command in Python (``pack_command``: an encode and three joins
per argument); its synchronous one hands them to ``hiredis.pack_command`` (``HiredisRespSerializer``) when
hiredis is installed. A gateway packs a command per ack written and several per handshake: at 1,000
clients the session flush alone packs ~1,000 nine-field ``HSET``s a second, ~11 µs each in Python against
~1.7 µs in hiredis (``timeit`` on a 2-CPU machine). Same bytes on the wire; an argument hiredis cannot pack (``None``, a
bool) raises ``DataError``, as redis-py's own packer does.
"""

from __future__ import annotations

from typing import Any

import hiredis
from redis.asyncio.connection import AbstractConnection, ConnectionPool
from redis.connection import HiredisRespSerializer
from redis.utils import HIREDIS_AVAILABLE

_SERIALIZER = HiredisRespSerializer()


class HiredisPacking:
    """Mixed in before an asyncio connection class: its commands packed by hiredis."""

    def pack_command(self, *args: Any) -> list[bytes]:
        # Straight to hiredis for a one-word command name (every command the gateway sends): redis-py's
        # serializer first walks the arguments in Python to split a two-word name ("SCRIPT LOAD") and copy
        # bytearrays, a third of a session flush's packing. Anything hiredis refuses goes redis-py's way.
        name = args[0]
        if (type(name) is str and " " not in name) or (type(name) is bytes and b" " not in name):
            try:
                return [hiredis.pack_command(args)]
            except TypeError:
                pass
        packed: list[bytes] = _SERIALIZER.pack(*args)
        return packed


_PACKED: dict[type[AbstractConnection], type[AbstractConnection]] = {}  # one subclass per connection class


def _packed(connection_class: type[AbstractConnection]) -> type[AbstractConnection]:
    if issubclass(connection_class, HiredisPacking):
        return connection_class
    packed = _PACKED.get(connection_class)
    if packed is None:
        packed = _PACKED[connection_class] = type(f"HiredisPacked{connection_class.__name__}",
                                                  (HiredisPacking, connection_class), {})
    return packed


def pack_with_hiredis(pool: ConnectionPool) -> ConnectionPool:
    """``pool``, whose connections made from now on pack with hiredis (its connection class kept: TCP, TLS,
    a Unix socket, a sentinel-managed one); unchanged when hiredis is not installed."""
    if HIREDIS_AVAILABLE:
        pool.connection_class = _packed(pool.connection_class)
    return pool
