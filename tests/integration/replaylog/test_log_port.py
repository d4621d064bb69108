"""The log port's contract (replaylog/port.py), run against both implementations: Redis (a real server,
entries committed by the real commit script) and memory (what in-process gateway tests run on). The same
assertions hold for both, so a gateway behaves the same on either."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass

import pytest
import redis as redis_lib

from sparkwire.replaylog import Record, ReplayLogWriter
from sparkwire.replaylog.memory import MemoryBackend
from sparkwire.replaylog.port import AckRecord, ConnectRecord, LogBackend, SessionPosition
from sparkwire.replaylog.redis_backend import RedisBackend
from sparkwire_harness.stack import RedisServer


@dataclass
class Store:
    backend: LogBackend
    commit: Callable[[list[Record]], Awaitable[None]]  # the writer's side: one batch


def records(first: int, count: int) -> list[Record]:
    return [Record(f"pid-{n:04d}", f"k{n % 4}", json.dumps({"n": n})) for n in range(first, first + count)]


@pytest.fixture(params=["redis", "memory"])
def make_store(request: pytest.FixtureRequest, redis_server: RedisServer, redis: redis_lib.Redis,
               unique_name: str) -> Iterator[Callable[[], AsyncIterator[Store]]]:
    """A store on the running loop (the asyncio Redis client binds to it) with an empty stream."""

    async def redis_store() -> AsyncIterator[Store]:
        backend = RedisBackend.for_gateway(redis_server.url, pool_size=4, streams=1)  # as a pod makes it
        writer = ReplayLogWriter(redis, unique_name, chunk_size=4)
        batches = iter(range(1_000))

        async def commit(batch: list[Record]) -> None:
            await asyncio.to_thread(writer.commit_batch, "q", next(batches), batch)

        yield Store(backend, commit)
        await backend.close()

    async def memory_store() -> AsyncIterator[Store]:
        backend = MemoryBackend()

        async def commit(batch: list[Record]) -> None:
            await backend.stream(unique_name).commit(batch)

        yield Store(backend, commit)

    yield redis_store if request.param == "redis" else memory_store


def run(make_store: Callable[[], AsyncIterator[Store]], test: Callable[[Store], Awaitable[None]]) -> None:
    async def main() -> None:
        stores = make_store()
        store = await anext(stores)
        try:
            await test(store)
        finally:
            await stores.aclose()

    asyncio.run(main())


def test_an_empty_stream(make_store: Callable[[], AsyncIterator[Store]], unique_name: str) -> None:
    async def check(store: Store) -> None:
        log = store.backend.stream(unique_name)
        meta = await log.meta()
        assert (meta.epoch, meta.first_seq, meta.last_seq) == ("", 1, 0)
        assert await log.read_after(0, 10) == []
        snapshot = await log.snapshot()
        assert (snapshot.epoch, snapshot.seq, snapshot.items) == ("", 0, {})
        history = await log.history(5)
        assert (history.seq, history.entries, history.items) == (0, [], {})
        started = time.monotonic()
        assert await log.follow(0, 10, 200) == []
        assert time.monotonic() - started >= 0.15  # it waited for a commit that did not come
        assert await log.descriptor() is None

    run(make_store, check)


def test_committed_entries_read_back_in_order_with_the_state_they_end_at(
    make_store: Callable[[], AsyncIterator[Store]], unique_name: str
) -> None:
    async def check(store: Store) -> None:
        await store.commit(records(0, 10))
        await store.commit(records(10, 15))
        log = store.backend.stream(unique_name)
        meta = await log.meta()
        assert meta.epoch and meta.last_seq == 25
        page = await log.read_after(10, 5)
        assert [(e.seq, e.processing_id, e.key, json.loads(e.data)) for e in page] == [
            (seq, f"pid-{seq - 1:04d}", f"k{(seq - 1) % 4}", {"n": seq - 1}) for seq in range(11, 16)]
        snapshot = await log.snapshot()
        assert (snapshot.epoch, snapshot.seq) == (meta.epoch, 25)
        assert {key: (item.seq, item.data) for key, item in snapshot.items.items()} == {
            "k0": (25, {"n": 24}), "k1": (22, {"n": 21}), "k2": (23, {"n": 22}), "k3": (24, {"n": 23})}
        history = await log.history(4)
        assert [entry.seq for entry in history.entries] == [22, 23, 24, 25] and history.seq == 25
        assert history.items == snapshot.items
        assert [entry.seq for entry in await log.follow(23, 10, 100)] == [24, 25]

    run(make_store, check)


def test_a_follower_wakes_when_entries_are_committed(
    make_store: Callable[[], AsyncIterator[Store]], unique_name: str
) -> None:
    async def check(store: Store) -> None:
        await store.commit(records(0, 2))
        log = store.backend.stream(unique_name)
        follower = asyncio.create_task(log.follow(2, 100, 5_000))
        await asyncio.sleep(0.2)
        assert not follower.done()
        started = time.monotonic()
        await store.commit(records(2, 3))
        woke = await asyncio.wait_for(follower, 3)
        assert [entry.seq for entry in woke] == [3, 4, 5]
        assert time.monotonic() - started < 2

    run(make_store, check)


def test_sessions_keep_their_subject_and_last_ack(
    make_store: Callable[[], AsyncIterator[Store]], unique_name: str
) -> None:
    async def check(store: Store) -> None:
        sessions = store.backend.sessions
        assert await sessions.lookup([("s1", unique_name)]) == [(None, None)]
        issued = [ConnectRecord("s1", unique_name, "alice", 1), ConnectRecord("s2", unique_name, "", 1)]
        await sessions.connected(issued, pod="pod-a", ttl_seconds=60)
        assert await sessions.lookup([("s1", unique_name), ("s2", unique_name)]) == [("alice", None), ("", None)]
        position = SessionPosition("e1", 7, duplicates=1, gaps=2, digest="0123456789abcdef",
                                   view="fedcba9876543210")
        await sessions.write([AckRecord("s1", unique_name, position, 2, "alice", True)], pod="pod-b", ttl_seconds=60)
        assert await sessions.lookup([("s1", unique_name), ("s1", unique_name + "-other"), ("s2", unique_name)]) == [
            ("alice", position), (None, None), ("", None)]
        assert await sessions.lookup([]) == []
        await store.backend.ping()
        assert (await store.backend.replication()).role == "master"

    run(make_store, check)


def test_the_entry_at_the_head_comes_with_each_follow_and_a_snapshot_names_its_entry(
    make_store: Callable[[], AsyncIterator[Store]], unique_name: str
) -> None:
    async def check(store: Store) -> None:
        log = store.backend.stream(unique_name)
        assert await log.follow_after(0, 10, 50) == (None, [])
        assert (await log.snapshot()).digest is None  # nothing committed: no entry at seq 0
        await store.commit(records(1, 5))
        held, entries = await log.follow_after(3, 10, 50)
        assert held is not None and (held.seq, held.processing_id) == (3, "pid-0003")
        assert [e.seq for e in entries] == [4, 5]
        snapshot = await log.snapshot()
        [head] = await log.read_after(4, 1)
        assert snapshot.seq == 5 and snapshot.digest == head.digest

    run(make_store, check)


def test_a_rewind_is_declared_once_only_where_the_log_lacks_what_the_reader_saw(
    make_store: Callable[[], AsyncIterator[Store]], unique_name: str
) -> None:
    """declare_rewind.lua on Redis (its SHA-1 digest in Lua must be the reader's in Python), and memory."""
    async def check(store: Store) -> None:
        log = store.backend.stream(unique_name)
        await store.commit(records(1, 5))
        epoch = (await log.meta()).epoch
        [fifth] = await log.read_after(4, 1)
        # The log holds what the reader saw (with or without a digest): nothing happens.
        assert await log.declare_rewind(epoch, 5, fifth.digest) == ("intact", epoch)
        assert await log.declare_rewind(epoch, 3, "") == ("intact", epoch)
        # Another entry at that seq (what a reader saw elsewhere): a new epoch, the entries kept.
        status, new = await log.declare_rewind(epoch, 5, "0123456789abcdef")
        assert status == "declared" and new != epoch and (await log.meta()).epoch == new
        assert [e.seq for e in await log.read_after(0, 10)] == [1, 2, 3, 4, 5]
        # Every other reader of the old epoch, or a retry, finds it moved and changes nothing.
        assert await log.declare_rewind(epoch, 9, "") == ("moved", new)
        # A log that ends before what a reader saw went back.
        status, newer = await log.declare_rewind(new, 9, "")
        assert status == "declared" and newer not in (epoch, new)

    run(make_store, check)
