"""A replicated Redis (a primary, two replicas, three sentinels: real processes) failing over after the primary
is SIGKILLed, and the clients ``sparkwire.replaylog.redis_url`` makes from its Sentinel URL following it."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis as redis_lib
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialWithJitterBackoff

from sparkwire.replaylog.redis_url import ADDRESS_MAP_ENV, FailoverFollower, connect, connect_async
from sparkwire_harness.chaos.toxiproxy import Toxiproxy
from sparkwire_harness.stack import ReplicatedRedis

# Down after 1 s, then an election and a promotion: a few seconds here; this is far above that.
FAILOVER_BOUND_S = 20.0


@pytest.fixture
def replicated(tmp_path: Path) -> Iterator[ReplicatedRedis]:
    stack = ReplicatedRedis(tmp_path)
    stack.start()
    try:
        yield stack
    finally:
        stack.stop()


def test_a_failover_promotes_a_replica_holding_what_was_written_and_the_old_primary_rejoins(
    replicated: ReplicatedRedis,
) -> None:
    old = replicated.primary()
    assert old is replicated.nodes[0] and replicated.replicas() == replicated.nodes[1:]
    client = replicated.client()
    for i in range(100):
        client.set(f"before-{i}", i)
    assert client.wait(1, 1000) >= 1  # the writes are on a replica before the crash

    assert replicated.kill_primary() is old
    new = replicated.wait_for_failover(old, timeout=FAILOVER_BOUND_S)
    assert new is not old and new in replicated.nodes
    with new.client() as direct:
        assert [int(v) for v in direct.mget([f"before-{i}" for i in range(100)])] == list(range(100))
        assert direct.info("replication")["role"] == "master"

    client.set("after", "1")  # the same client, now on the new primary
    replicated.restart(old)  # comes back as a replica of the new primary, not as a second primary
    assert replicated.primary() is new
    with old.client() as rejoined:
        assert rejoined.info("replication")["role"] == "slave"
        assert rejoined.get("after") == b"1" and rejoined.get("before-99") == b"99"
    client.close()


def test_a_sync_client_writes_again_after_a_failover_without_being_made_again(
    replicated: ReplicatedRedis,
) -> None:
    client = connect(replicated.url, socket_timeout=1.0, socket_connect_timeout=1.0)
    client.set("n", 0)
    old = replicated.kill_primary()
    killed_at = time.monotonic()
    errors: list[str] = []
    written = 0
    recovered_after = None
    while written < 50:
        assert time.monotonic() - killed_at < FAILOVER_BOUND_S, f"no write succeeded in time: {errors[-5:]}"
        try:
            client.set(f"w-{written}", written)
        except redis_lib.RedisError as error:
            errors.append(f"{type(error).__name__}: {error}")
            time.sleep(0.05)
            continue
        if written == 0:
            recovered_after = time.monotonic() - killed_at
        written += 1
    new = replicated.wait_for_failover(old, timeout=FAILOVER_BOUND_S)
    with new.client() as direct:
        assert direct.get("w-49") == b"49" and direct.get("n") == b"0"
    # What a caller sees meanwhile is a connection error (retryable), nothing else.
    assert all(e.startswith(("ConnectionError", "MasterNotFoundError", "TimeoutError")) for e in errors), errors
    print(f"first write {recovered_after:.1f} s after the kill, {len(errors)} failed calls before")
    client.close()


def test_an_async_client_follows_a_failover_too(replicated: ReplicatedRedis) -> None:
    async def run() -> tuple[float, list[str]]:
        client = connect_async(replicated.url, max_connections=4, timeout=5, health_check_interval=10)
        try:
            await client.set("n", 0)
            old = replicated.kill_primary()
            killed_at = time.monotonic()
            errors: list[str] = []
            while True:
                assert time.monotonic() - killed_at < FAILOVER_BOUND_S, f"no write succeeded in time: {errors[-5:]}"
                try:
                    await client.set("after", 1)
                    break
                except redis_lib.RedisError as error:
                    errors.append(f"{type(error).__name__}: {error}")
                    await asyncio.sleep(0.05)
            recovered_after = time.monotonic() - killed_at
            assert await client.get("n") == b"0"
            new = replicated.wait_for_failover(old, timeout=FAILOVER_BOUND_S)
            with new.client() as direct:
                assert direct.get("after") == b"1"
            return recovered_after, errors
        finally:
            await client.aclose()

    recovered_after, errors = asyncio.run(run())
    assert all(e.startswith(("ConnectionError", "MasterNotFoundError", "TimeoutError")) for e in errors), errors
    print(f"first write {recovered_after:.1f} s after the kill, {len(errors)} failed calls before")


def _mapped_partitionable(tmp_path: Path, toxiproxy: Toxiproxy, monkeypatch: pytest.MonkeyPatch) -> ReplicatedRedis:
    """Every node announced at a proxy (its replication link), and dialled by clients through a second proxy
    of their own (the address map): cutting a node's link leaves clients reaching it."""
    replicated = ReplicatedRedis(tmp_path / "redis", route=lambda name, port: toxiproxy.create_proxy(name, port))
    replicated.start()
    mapping = {f"127.0.0.1:{replicated.announced_port(node)}":
               f"127.0.0.1:{toxiproxy.create_proxy(f'client-n{index}', node.port)}"
               for index, node in enumerate(replicated.nodes)}
    monkeypatch.setenv(ADDRESS_MAP_ENV, ",".join(f"{a}={b}" for a, b in mapping.items()))
    return replicated


# What a gateway's hub does after a failover its primary was cut off in: (its client, made as the gateway makes it;
# the follower; the id of the entry the hub read last).
AfterFailover = Callable[[Any, FailoverFollower, Any], Awaitable[None]]


def _read_through_a_cut_off_primary(tmp_path: Path, toxiproxy: Toxiproxy, monkeypatch: pytest.MonkeyPatch,
                                    after_failover: AfterFailover) -> None:
    """Entry 1 written, the primary's replication link cut, the failover awaited and entry 2 written on the new
    primary (as the writer commits it); then ``after_failover`` runs while the cut lasts. The client has a Retry,
    as the gateway's: a dropped blocking read is resent on the same connection, which must dial the new primary,
    not the address it had (redis-py's own reconnect there did: ``redis_url``)."""
    replicated = _mapped_partitionable(tmp_path, toxiproxy, monkeypatch)

    async def run() -> None:
        client = connect_async(replicated.url, max_connections=4, timeout=5, socket_timeout=2.0,
                               socket_connect_timeout=2.0,
                               retry=Retry(ExponentialWithJitterBackoff(base=0.05, cap=1.0), retries=3))
        follower = FailoverFollower(client)
        try:
            first = await client.xadd("log", {"n": "1"})
            assert await follower.follow() is False  # the same primary: nothing dropped
            old = replicated.primary()
            cut = toxiproxy.add_fault(replicated.link(old), "cut-off", "blackhole", {})
            try:
                new = await asyncio.to_thread(replicated.wait_for_failover, old, FAILOVER_BOUND_S)
                with new.client() as direct:
                    direct.xadd("log", {"n": "2"})
                await after_failover(client, follower, first)
            finally:
                toxiproxy.remove(replicated.link(old), cut)
        finally:
            await client.aclose()

    try:
        asyncio.run(run())
    finally:
        replicated.stop()


def test_a_reader_on_a_cut_off_primary_moves_to_the_new_one_when_it_follows_the_failover(
    tmp_path: Path, toxiproxy: Toxiproxy, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A gateway's case: its hub only reads (a blocking XREAD), so the cut-off primary never refuses it and,
    left alone, it reads the old primary's log until the sentinels demote that node after the heal.
    ``FailoverFollower`` (the gateway's replication poll) moves it — the blocking read included —
    to the new primary while the cut lasts; before the failover it changes nothing."""
    async def after_failover(client: Any, follower: FailoverFollower, first: Any) -> None:
        # Still on the old primary (the pooled connection is reused): it answers, with the old log.
        assert await client.xlen("log") == 1
        # The hub's read: after the last entry it has; the old primary has nothing more, so it blocks.
        blocked = asyncio.create_task(client.xread({"log": first}, block=30_000))
        await asyncio.sleep(0.2)
        assert await follower.follow() is True
        # Its connection dropped, the Retry resent it: on the new primary it finds entry 2 at once.
        [[_, entries]] = await asyncio.wait_for(blocked, 5)
        assert [fields for _, fields in entries] == [{b"n": b"2"}]
        assert await client.xlen("log") == 2, "the reader should be on the new primary"
        assert await follower.follow() is False

    _read_through_a_cut_off_primary(tmp_path, toxiproxy, monkeypatch, after_failover)


def test_a_blocking_read_follows_the_failover_when_another_connection_reconnected_first(
    tmp_path: Path, toxiproxy: Toxiproxy, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The race a chaos run found: while the hub's blocking read waits on the cut-off primary, another call
    of the gateway (an ack) needs a second connection, which asks the sentinels and reaches the new primary;
    redis-py then records the new address in the pool and drops only idle connections. The follower must
    still drop the blocking read's connection: it compares with the primary it saw, not the pool's."""
    async def after_failover(client: Any, follower: FailoverFollower, first: Any) -> None:
        blocked = asyncio.create_task(client.xread({"log": first}, block=30_000))
        await asyncio.sleep(0.2)
        # A second connection (the first is in use): it dials the sentinels' primary, the new one.
        assert await client.xlen("log") == 2
        assert not blocked.done(), "the blocking read should still wait on the old primary"
        assert await follower.follow() is True
        [[_, entries]] = await asyncio.wait_for(blocked, 5)
        assert [fields for _, fields in entries] == [{b"n": b"2"}]

    _read_through_a_cut_off_primary(tmp_path, toxiproxy, monkeypatch, after_failover)


def test_a_primary_cut_off_from_its_replicas_and_sentinels_is_replaced_and_its_client_follows(
    tmp_path: Path, toxiproxy: Toxiproxy, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The chaos run's "primary partitioned": every node is announced at a proxy (its replication link), and the
    client dials each node through a second proxy of its own (the address map). Cutting the primary's
    replication link leaves the client reaching it: the primary refuses writes once no replica acknowledged
    for min-replicas-max-lag (NOREPLICAS), the sentinels promote a replica, and the same client writes there.
    After the heal the old primary comes back as a replica of the new one, with the writes it missed."""
    replicated = _mapped_partitionable(tmp_path, toxiproxy, monkeypatch)
    try:
        client = connect(replicated.url, socket_timeout=1.0, socket_connect_timeout=1.0)
        client.set("before", 1)
        assert client.connection_pool.get_master_address() == ("127.0.0.1", toxiproxy.listen_ports["client-n0"])

        old = replicated.primary()
        cut = toxiproxy.add_fault(replicated.link(old), "cut-off", "blackhole", {})
        cut_at = time.monotonic()
        errors: list[str] = []
        while True:
            assert time.monotonic() - cut_at < FAILOVER_BOUND_S, f"no write on a new primary in time: {errors[-5:]}"
            try:
                client.set("after", 1)
                if client.wait(1, 500) >= 1:  # on a primary that has a replica: the new one
                    break
            except redis_lib.RedisError as error:
                errors.append(f"{type(error).__name__}: {error}")
                time.sleep(0.1)
        new = replicated.wait_for_failover(old, timeout=FAILOVER_BOUND_S)
        assert new is not old
        print(f"writing on the new primary {time.monotonic() - cut_at:.1f} s after the cut; errors: {errors}")
        assert any("NOREPLICAS" in e for e in errors), "the cut-off primary should have refused writes"
        assert all(e.startswith(("ConnectionError", "MasterNotFoundError", "TimeoutError")) for e in errors), errors

        toxiproxy.remove(replicated.link(old), cut)
        deadline = time.monotonic() + FAILOVER_BOUND_S
        while True:  # the sentinels turn the old primary into a replica of the new one
            with old.client() as direct:
                info = direct.info("replication")
                if info["role"] == "slave" and info.get("master_link_status") == "up" and direct.get("after"):
                    break
            assert time.monotonic() < deadline, f"the old primary did not rejoin: {info}"
            time.sleep(0.2)
        assert replicated.primary() is new
        client.close()
    finally:
        replicated.stop()
