"""A Redis address as a URL -> a client: one Redis server, or the primary a set of Redis Sentinels names (the
replay log's writer, its readers and the test stack connect through it).

Forms accepted:

- ``redis://[[user]:password@]host[:port][/db]``, ``rediss://…`` (TLS), ``unix://…``: one server, as
  ``redis.Redis.from_url`` reads them (query options included).
- ``redis+sentinel://[[user]:password@]host1[:port1][,host2[:port2],…]/<master-name>[/<db>]``: the
  primary of a replicated Redis, found through the sentinels ``host1:port1, …`` (port 26379 when left out;
  an IPv6 host in brackets, ``[::1]:26379``), which monitor it under ``<master-name>`` (their
  ``sentinel monitor <master-name> …``). ``<db>``: the database number, 0 when left out. The user and
  password (percent-encoded) are the primary's; the sentinels are asked without (redis-py's default for
  them). No query string. Example: ``redis+sentinel://:secret@10.0.0.1:26379,10.0.0.2:26379/sparkwire/0``.

A client of a Sentinel URL asks the sentinels for the primary's address whenever one of its connections
(re)connects, so it follows a failover without being made again (see :func:`connect`).

**Address map.** Sentinels name the primary by the address the Redis nodes announce to each other. Where a
client must reach a node by another address (NAT, a port-forward, a proxy per network link as in the chaos
run), ``SPARKWIRE_REDIS_ADDRESS_MAP`` maps announced addresses to the ones to dial:
``host:port=host:port[,host:port=host:port…]``; addresses not in the map are dialled as named. redis-py's
Redis Cluster client has the same idea (``address_remap``); its Sentinel client does not.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

import redis
import redis.asyncio as redis_async
import redis.asyncio.retry as async_retry
import redis.asyncio.sentinel as async_sentinel
import redis.retry as sync_retry
import redis.sentinel as sync_sentinel
from redis.backoff import NoBackoff
from redis.driver_info import DriverInfo
from redis.exceptions import ResponseError

from sparkwire.replaylog.packing import pack_with_hiredis

__all__ = ["ADDRESS_MAP_ENV", "FailoverFollower", "SentinelAddress", "connect", "connect_async", "is_sentinel_url",
           "parse_address_map", "parse_sentinel_url"]

SENTINEL_SCHEME = "redis+sentinel"
DEFAULT_SENTINEL_PORT = 26379
# Sentinels answer small questions from memory: a sentinel that takes longer is treated as down and the next
# one is asked. A caller's own, shorter socket_timeout / socket_connect_timeout replaces this.
SENTINEL_TIMEOUT_S = 2.0

ADDRESS_MAP_ENV = "SPARKWIRE_REDIS_ADDRESS_MAP"
# Replies of a primary that cannot take this command now, though a sentinel may already name another one: it
# lost its replicas (min-replicas-to-write: it is likely cut off, and being replaced), or it unblocked a
# blocking read because it is becoming a replica. Like READONLY (which redis-py handles so), the connection
# is dropped and the error raised as a ConnectionError, so the caller's retry reconnects, asking the sentinels.
_ASK_THE_SENTINELS_AGAIN = ("NOREPLICAS", "UNBLOCKED")
Address = tuple[str, int]

_HOST_PORT = re.compile(r"^(?:\[(?P<v6>[^\]]+)\]|(?P<host>[^:\[\]]+))(?::(?P<port>[^:]*))?\Z")


@dataclass(frozen=True)
class SentinelAddress:
    """What a ``redis+sentinel://`` URL names."""

    sentinels: tuple[tuple[str, int], ...]
    master_name: str
    db: int = 0
    username: str | None = None
    password: str | None = None

    def client_kwargs(self) -> dict[str, Any]:
        """The primary's connection settings the URL holds (they win over a caller's, as with from_url)."""
        kwargs: dict[str, Any] = {"db": self.db}
        if self.username is not None:
            kwargs["username"] = self.username
        if self.password is not None:
            kwargs["password"] = self.password
        return kwargs


def is_sentinel_url(url: str) -> bool:
    return url.split("://", 1)[0].lower() == SENTINEL_SCHEME and "://" in url


def _redacted(url: str) -> str:
    """The URL without its password, for error messages."""
    scheme, sep, rest = url.partition("://")
    netloc, slash, path = rest.partition("/")
    if "@" in netloc:
        netloc = "***@" + netloc.rpartition("@")[2]
    return f"{scheme}{sep}{netloc}{slash}{path}"


def _parse_host(text: str, url: str) -> tuple[str, int]:
    match = _HOST_PORT.match(text)
    if match is None:
        raise ValueError(f"Sentinel URL {_redacted(url)!r}: bad sentinel address {text!r} (host:port expected)")
    host = match.group("v6") or match.group("host")
    port_text = match.group("port")
    if port_text is None:
        return host, DEFAULT_SENTINEL_PORT
    if not port_text.isdigit() or not 0 < int(port_text) < 65536:
        raise ValueError(f"Sentinel URL {_redacted(url)!r}: bad port {port_text!r} in {text!r}")
    return host, int(port_text)


def parse_sentinel_url(url: str) -> SentinelAddress:
    """The sentinels, master name, db and credentials of a ``redis+sentinel://`` URL; ValueError if malformed."""
    if not is_sentinel_url(url):
        raise ValueError(f"not a Sentinel URL (want {SENTINEL_SCHEME}://…): {_redacted(url)!r}")
    rest = url.split("://", 1)[1]
    if "?" in rest or "#" in rest:
        raise ValueError(f"Sentinel URL {_redacted(url)!r}: a query string or fragment is not supported")
    netloc, _, path = rest.partition("/")
    username: str | None = None
    password: str | None = None
    if "@" in netloc:
        userinfo, _, netloc = netloc.rpartition("@")
        user_text, has_password, password_text = userinfo.partition(":")
        username = unquote(user_text) or None
        password = unquote(password_text) if has_password else None
    if not netloc:
        raise ValueError(f"Sentinel URL {_redacted(url)!r}: no sentinel hosts")
    sentinels = tuple(_parse_host(part, url) for part in netloc.split(","))
    segments = path.split("/")
    if segments[-1] == "" and len(segments) > 1:
        segments.pop()  # one trailing slash
    master_name = unquote(segments[0])
    if not master_name:
        raise ValueError(f"Sentinel URL {_redacted(url)!r}: no master name (…/<master-name>[/<db>])")
    if len(segments) > 2:
        raise ValueError(f"Sentinel URL {_redacted(url)!r}: only /<master-name>[/<db>] may follow the hosts")
    db = 0
    if len(segments) == 2:
        if not segments[1].isdigit():
            raise ValueError(f"Sentinel URL {_redacted(url)!r}: bad db {segments[1]!r} (a number expected)")
        db = int(segments[1])
    return SentinelAddress(sentinels, master_name, db, username, password)


def parse_address_map(text: str) -> dict[Address, Address]:
    """``host:port=host:port,…`` (module docstring) -> {announced: dialled}; ValueError if malformed."""
    mapping: dict[Address, Address] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        announced, sep, dialled = item.partition("=")
        if not sep:
            raise ValueError(f"{ADDRESS_MAP_ENV}: {item!r} is not announced-host:port=dialled-host:port")
        pair = []
        for side in (announced, dialled):
            host, _, port = side.strip().rpartition(":")
            if not host or not port.isdigit() or not 0 < int(port) < 65536:
                raise ValueError(f"{ADDRESS_MAP_ENV}: bad address {side!r} in {item!r} (host:port expected)")
            pair.append((host.strip("[]"), int(port)))
        mapping[pair[0]] = pair[1]
    return mapping


def _address_map() -> dict[Address, Address]:
    return parse_address_map(os.environ.get(ADDRESS_MAP_ENV, ""))


def _mapped(mapping: Mapping[Address, Address], address: Address) -> Address:
    host, port = address
    return mapping.get((str(host), int(port)), (str(host), int(port)))


def _sentinel_kwargs(kwargs: dict[str, Any], retry: object) -> dict[str, Any]:
    timeouts = {"socket_timeout": SENTINEL_TIMEOUT_S, "socket_connect_timeout": SENTINEL_TIMEOUT_S}
    # A caller's shorter timeouts apply to the sentinels too; a longer one (meant for the data connections'
    # commands) does not make a hung sentinel count as up for longer.
    timeouts.update({k: min(v, SENTINEL_TIMEOUT_S) for k, v in kwargs.items() if k in timeouts and v is not None})
    # One try per sentinel: discover_master goes on to the next sentinel when one fails, so a retrying
    # client (the default: 10 tries with backoff) would only delay the answer of the others.
    return {**timeouts, "retry": retry}


# How a sentinel-managed client follows a failover, as read in the installed redis-py (8.1,
# redis/sentinel.py and redis/asyncio/sentinel.py; tests/integration/harness/stack/test_redis_sentinel.py shows it):
# - every (re)connect of a pooled connection (SentinelManagedConnection._connect_retry) asks the sentinels for
#   the primary (Sentinel.discover_master: the first sentinel that names one that is not down); a new
#   address makes the pool drop its idle connections, and a connection to an address that is no longer the
#   primary's is not taken back (owns_connection);
# - a command that fails with a connection error disconnects its connection, so the next command (or the
#   retry of this one, if the client has a Retry) reconnects, asking the sentinels again; MasterNotFoundError,
#   raised while no sentinel names a primary that is up, is a ConnectionError too;
# - a READONLY reply (a demoted primary still reached through an old connection) is turned into a
#   disconnect plus ConnectionError in SentinelManagedConnection.read_response: the same path.
# Like Redis.from_url's, master_for's client has no Retry unless given one (it builds the pool itself, and a
# connection without ``retry`` gets Retry(NoBackoff(), 0)): while a failover lasts (seconds) its commands
# fail at once with ConnectionError, and the same client works again afterwards. Callers retry (the replay
# log writer for 30 s, the gateway with its Retry and its clients' resume).


class _MappedSentinel(sync_sentinel.Sentinel):
    """A Sentinel whose primary's address goes through the address map (module docstring)."""

    def __init__(self, sentinels: Any, address_map: Mapping[Address, Address], **kwargs: Any) -> None:
        super().__init__(sentinels, **kwargs)  # type: ignore[no-untyped-call]
        self.address_map = dict(address_map)

    def discover_master(self, service_name: str) -> Address:
        return _mapped(self.address_map, super().discover_master(service_name))  # type: ignore[no-untyped-call]


class _MappedAsyncSentinel(async_sentinel.Sentinel):
    def __init__(self, sentinels: Any, address_map: Mapping[Address, Address], **kwargs: Any) -> None:
        super().__init__(sentinels, **kwargs)  # type: ignore[no-untyped-call]
        self.address_map = dict(address_map)

    async def discover_master(self, service_name: str) -> Address:
        return _mapped(self.address_map, await super().discover_master(service_name))


def _ask_again(error: ResponseError) -> bool:
    return str(error).startswith(_ASK_THE_SENTINELS_AGAIN)


# redis-py (8.1) reconnects a dropped connection inside ``send_packed_command`` with ``connect_check_health``,
# which dials the address the connection had before: the Sentinel-managed ``connect`` (ask the sentinels for
# the primary) only runs when the pool hands out a connection. A command resent by the client's Retry goes
# out on the same connection object, so after a failover — or after ``FailoverFollower`` dropped it — it went
# back to the old primary: a chaos run (seed 7) saw every gateway's hub read the cut-off primary's frozen
# log for 15 s after following the failover, until the sentinels demoted that node. Both classes below
# reconnect through the sentinels instead.


class _FollowingConnection(sync_sentinel.SentinelManagedConnection):
    """Drops itself on a reply that says the primary cannot serve now (``_ASK_THE_SENTINELS_AGAIN``), and
    reconnects through the sentinels (above)."""

    def send_packed_command(self, command: Any, check_health: bool = True) -> None:
        if self._sock is None:
            self.connect()  # type: ignore[no-untyped-call]
        super().send_packed_command(command, check_health)  # type: ignore[no-untyped-call]

    def read_response(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return super().read_response(*args, **kwargs)
        except ResponseError as error:
            if not (self.connection_pool.is_master and _ask_again(error)):
                raise
            self.disconnect()  # type: ignore[no-untyped-call]
            raise redis.ConnectionError(f"the primary cannot serve now ({error}); asking the sentinels") from error


class _AsyncFollowingConnection(async_sentinel.SentinelManagedConnection):
    """The asyncio twin of :class:`_FollowingConnection`."""

    async def send_packed_command(self, command: Any, check_health: bool = True) -> None:
        if not self.is_connected:
            await self.connect()  # type: ignore[no-untyped-call]
        await super().send_packed_command(command, check_health)

    async def read_response(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return await super().read_response(*args, **kwargs)
        except ResponseError as error:
            if not (self.connection_pool.is_master and _ask_again(error)):
                raise
            await self.disconnect()
            raise redis.ConnectionError(f"the primary cannot serve now ({error}); asking the sentinels") from error


class _SentinelPool(sync_sentinel.SentinelConnectionPool):
    """redis-py leaves the Sentinel's own clients open when the Redis client made by master_for closes its
    pool; this pool closes them with it (the client owns both)."""

    def close(self) -> None:
        super().close()
        self.sentinel_manager.close()


class _BlockingSentinelPool(async_sentinel.SentinelConnectionPool, redis_async.BlockingConnectionPool):
    """A sentinel-managed pool that waits for a free connection (up to ``timeout``) instead of failing, as the
    gateway's plain BlockingConnectionPool does. By the MRO, SentinelConnectionPool's ``__init__`` hands
    ``max_connections`` and ``timeout`` on to BlockingConnectionPool's, whose get_connection / release are
    the ones used; the sentinel part only changes how a connection finds its address (and reset,
    owns_connection). Closes the Sentinel's own clients with the pool, like :class:`_SentinelPool`."""

    async def aclose(self) -> None:
        await super().aclose()
        await self.sentinel_manager.aclose()


def connect(url: str, *, address_map: Mapping[Address, Address] | None = None, **kwargs: Any) -> redis.Redis:
    """A client of the Redis ``url`` names (module docstring); ``kwargs`` as for ``redis.Redis``. For a
    Sentinel URL, the client of the current primary that follows a failover (``Sentinel.master_for``), dialling
    through ``address_map`` (default: ``SPARKWIRE_REDIS_ADDRESS_MAP``)."""
    if not is_sentinel_url(url):
        return redis.Redis.from_url(url, **kwargs)
    address = parse_sentinel_url(url)
    # redis.sentinel has no annotations (redis.asyncio.sentinel has some).
    sentinel = _MappedSentinel(address.sentinels, _address_map() if address_map is None else address_map,
                               sentinel_kwargs=_sentinel_kwargs(kwargs, sync_retry.Retry(NoBackoff(), 0)))
    client: redis.Redis = sentinel.master_for(  # type: ignore[no-untyped-call]
        address.master_name, connection_pool_class=_SentinelPool, connection_class=_FollowingConnection,
        **{**kwargs, **address.client_kwargs()})
    return client


# What every connection of a gateway's pool tells Redis it is (CLIENT SETINFO), made once: redis-py makes a
# DriverInfo per new connection otherwise, and reads its own version from the installed package's metadata
# for each (importlib.metadata searching sys.path, ~1 ms). A pod makes new connections exactly when it is
# busiest: when thousands of clients resume at once after another pod was lost, and its pool grows.
_DRIVER_INFO = DriverInfo()


def connect_async(url: str, *, max_connections: int, address_map: Mapping[Address, Address] | None = None,
                  **kwargs: Any) -> redis_async.Redis:
    """An asyncio client whose pool holds up to ``max_connections`` and waits for a free one (``timeout``
    seconds, in ``kwargs`` with the connection settings): a ``BlockingConnectionPool`` for a one-server URL,
    a sentinel-managed one that behaves alike for a Sentinel URL. The client owns (and closes) its pool."""
    kwargs.setdefault("driver_info", _DRIVER_INFO)
    if not is_sentinel_url(url):
        pool = redis_async.BlockingConnectionPool.from_url(url, max_connections=max_connections, **kwargs)
        return redis_async.Redis.from_pool(pack_with_hiredis(pool))
    address = parse_sentinel_url(url)
    sentinel = _MappedAsyncSentinel(address.sentinels, _address_map() if address_map is None else address_map,
                                    sentinel_kwargs=_sentinel_kwargs(kwargs, async_retry.Retry(NoBackoff(), 0)))
    client: redis_async.Redis = sentinel.master_for(
        address.master_name, connection_pool_class=_BlockingSentinelPool, max_connections=max_connections,
        connection_class=_AsyncFollowingConnection, **{**kwargs, **address.client_kwargs()})
    pack_with_hiredis(client.connection_pool)
    return client


class FailoverFollower:
    """For a client of :func:`connect_async` on a Sentinel URL: :meth:`follow` asks the sentinels which node is
    the primary now, and if it is not the one they named the last time it asked, drops every connection, those
    in use too (a blocking read), so each next command reconnects to the new primary.

    Why: a primary cut off from its replicas and the sentinels, but still reached by this client, keeps
    answering reads after the sentinels promoted another node — a client only asks them again when one of its
    connections reconnects, and nothing makes a reader's connections reconnect until the sentinels demote the
    old primary after the cut heals. A chaos run (seed 7) saw the gateways serve the old primary's stale log
    for ~18 s after a 12 s cut while the Spark job already committed on the new one. A writer does not need
    this: the cut-off primary refuses its writes (NOREPLICAS) and :class:`_AsyncFollowingConnection`
    reconnects. It compares with the address *it* saw last, not the pool's: any other connection of the pool
    that reconnects meanwhile asks the sentinels too, and redis-py then records the new address but drops only
    idle connections — a blocking read in use stayed on the old primary (a later seed-7 run: every client held
    for 14 s, the hub on the old primary until its demotion). A one-server client: False, nothing asked."""

    def __init__(self, client: redis_async.Redis) -> None:
        self.client = client
        self.primary: tuple[str, int] | None = None
        """The primary the sentinels named at the last :meth:`follow` (before the first: the pool's)."""

    async def follow(self) -> bool:
        """True when the primary changed since the last call and every connection was dropped."""
        pool = self.client.connection_pool
        if not isinstance(pool, async_sentinel.SentinelConnectionPool) or not pool.is_master:
            return False
        known = pool.master_address
        before = self.primary or (tuple(known) if known is not None else None)
        now = tuple(await pool.get_master_address())  # type: ignore[no-untyped-call]
        self.primary = (str(now[0]), int(now[1]))
        if before is None or tuple(before) == now:
            return False
        await pool.disconnect(inuse_connections=True)
        return True
