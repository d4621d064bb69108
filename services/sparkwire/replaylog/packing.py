"""The gateway's asyncio Redis connections with hiredis both ways: commands packed by hiredis, as redis-py's
synchronous clients already do, and a reply already read off the socket taken without a wait.

redis-py's asyncio ``Connection`` packs every command in Python (``pack_command``: an encode and three joins
per argument); its synchronous one hands them to ``hiredis.pack_command`` (``HiredisRespSerializer``) when
hiredis is installed. A gateway packs a command per ack written and several per handshake: at 1,000
clients the session flush alone packs ~1,000 nine-field ``HSET``s a second, ~11 µs each in Python against
~1.7 µs in hiredis (``timeit`` on a 2-CPU machine). Same bytes on the wire; an argument hiredis cannot pack (``None``, a
bool) raises ``DataError``, as redis-py's own packer does.

Replies: a pipeline's replies arrive together, and the first one's read hands every byte received to
hiredis's reader. redis-py still reads each later reply the way it reads one it must wait for: a timeout
context (a timer scheduled and cancelled), the parser's coroutine, the health check's clock. ``BufferedReplies``
takes a reply hiredis already holds at once, and leaves every other read (one that must wait, undecoded, with
its own timeout) to redis-py: a session flush of 250 acks went from 33-37 µs of the pod's CPU per ack to 22-23
(``bench/session_flush.py``).
"""

from __future__ import annotations

import asyncio
from typing import Any

import hiredis
from redis._parsers.hiredis import NOT_ENOUGH_DATA, _AsyncHiredisParser
from redis.asyncio.connection import AbstractConnection, ConnectionPool
from redis.connection import HiredisRespSerializer
from redis.exceptions import ConnectionError, ResponseError
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


class BufferedReplies(AbstractConnection):
    """Mixed in *after* an asyncio connection class (``_packed``): a reply its hiredis reader already holds
    returned at once, as ``AbstractConnection.read_response`` would return it (errors raised, the connection
    dropped for a connection error, the health check's time moved on); anything else read by redis-py.

    After, so that in the method resolution order it comes right before ``AbstractConnection``: every class
    between (a sentinel-managed connection turning a demoted primary's ``READONLY`` into a connection error,
    ``redis_url._AsyncFollowingConnection`` doing so for the errors of a failover) still wraps every reply."""

    async def read_response(self, disable_decoding: bool = False, timeout: float | None = None, *,
                            disconnect_on_error: bool = True, push_request: bool | None = False) -> Any:
        parser = self._parser
        if (timeout is None and not disable_decoding and not push_request and type(parser) is _AsyncHiredisParser
                and parser._connected and parser._reader is not None):
            response = parser._reader.gets()
            if response is not NOT_ENOUGH_DATA:
                return await self._buffered(parser, response, disconnect_on_error)
        return await super().read_response(disable_decoding, timeout,
                                           disconnect_on_error=disconnect_on_error, push_request=push_request)

    async def _buffered(self, parser: _AsyncHiredisParser, response: Any, disconnect_on_error: bool) -> Any:
        """What ``_AsyncHiredisParser.read_response`` and then ``read_response`` do with a reply (redis-py is
        pinned; tests/integration/replaylog/test_buffered_replies.py compares the two paths reply by reply)."""
        push = parser._hiredis_PushNotificationType
        if push is not None and isinstance(response, push):
            await parser.handle_push_response(response)
            return await self.read_response(disconnect_on_error=disconnect_on_error)
        lost = response if isinstance(response, ConnectionError) else (
            response[0] if isinstance(response, list) and response and isinstance(response[0], ConnectionError)
            else None)
        if lost is not None:
            if disconnect_on_error:
                await self.disconnect(nowait=True)
            raise lost
        if self.health_check_interval:
            self.next_health_check = asyncio.get_running_loop().time() + self.health_check_interval
        if isinstance(response, ResponseError):
            raise response from None
        return response


_PACKED: dict[type[AbstractConnection], type[AbstractConnection]] = {}  # one subclass per connection class


def _packed(connection_class: type[AbstractConnection]) -> type[AbstractConnection]:
    if issubclass(connection_class, HiredisPacking):
        return connection_class
    packed = _PACKED.get(connection_class)
    if packed is None:
        packed = _PACKED[connection_class] = type(f"HiredisPacked{connection_class.__name__}",
                                                  (HiredisPacking, connection_class, BufferedReplies), {})
    return packed


def pack_with_hiredis(pool: ConnectionPool) -> ConnectionPool:
    """``pool``, whose connections made from now on pack with hiredis and take buffered replies at once (its
    connection class kept: TCP, TLS, a Unix socket, a sentinel-managed one); unchanged when hiredis is not
    installed."""
    if HIREDIS_AVAILABLE:
        pool.connection_class = _packed(pool.connection_class)
    return pool
