"""``ReplayLogReader.history`` / ``AsyncReplayLogReader.history`` against a real Redis: the last N entries and
the state they end at, bounded, in one transaction (consistent while a writer commits)."""

from __future__ import annotations

import asyncio
import json
import threading

import pytest
import redis as redis_lib
import redis.asyncio as redis_async

from sparkwire.replaylog import History, Record, ReplayLogReader, ReplayLogWriter, StreamKeys
from sparkwire.replaylog.async_reader import AsyncReplayLogReader
from sparkwire_harness.stack import RedisServer


def commit(writer: ReplayLogWriter, batch: int, first: int, count: int, keys: int = 7) -> None:
    writer.commit_batch("q", batch, [Record(f"pid-{n:06d}", f"k{n % keys}", json.dumps({"n": n}))
                                     for n in range(first, first + count)])


def check_consistent(history: History) -> None:
    """Entries consecutive and ending at ``seq``; the state is the latest entry of every key they hold."""
    seqs = [entry.seq for entry in history.entries]
    assert seqs == list(range(history.seq - len(seqs) + 1, history.seq + 1))
    latest = {entry.key: entry for entry in history.entries}
    for key, entry in latest.items():
        assert (history.items[key].seq, history.items[key].processing_id) == (entry.seq, entry.processing_id)
    assert all(item.seq <= history.seq for item in history.items.values())


def test_an_empty_stream_has_no_history(redis: redis_lib.Redis, unique_name: str) -> None:
    history = ReplayLogReader(redis, unique_name).history(100)
    assert (history.epoch, history.seq, history.first_seq, history.entries, history.items) == ("", 0, 1, [], {})


def test_the_last_n_entries_and_the_state_they_end_at(redis: redis_lib.Redis, unique_name: str) -> None:
    writer = ReplayLogWriter(redis, unique_name)
    reader = ReplayLogReader(redis, unique_name)
    for batch in range(3):
        commit(writer, batch, batch * 10, 10)
    epoch = reader.meta().epoch

    last_ten = reader.history(10)
    assert (last_ten.epoch, last_ten.seq, last_ten.first_seq) == (epoch, 30, 1)
    assert [(e.seq, e.processing_id, json.loads(e.data)) for e in last_ten.entries] == [
        (n + 1, f"pid-{n:06d}", {"n": n}) for n in range(20, 30)]
    assert last_ten.items == reader.snapshot().items
    assert sorted(last_ten.items) == [f"k{i}" for i in range(7)]
    check_consistent(last_ten)

    assert [e.seq for e in reader.history(1000).entries] == list(range(1, 31))  # fewer in the log than asked
    none = reader.history(0)
    assert (none.seq, none.entries, none.items) == (30, [], last_ten.items)
    with pytest.raises(ValueError, match="at least 0"):
        reader.history(-1)


def test_a_trimmed_log_gives_what_it_still_holds(redis: redis_lib.Redis, unique_name: str) -> None:
    writer = ReplayLogWriter(redis, unique_name, retention=25)
    for batch in range(6):
        commit(writer, batch, batch * 10, 10)
    history = ReplayLogReader(redis, unique_name).history(1000)
    assert history.first_seq == history.entries[0].seq == 36
    assert history.seq == 60
    check_consistent(history)


def test_reads_under_a_writer_are_consistent(redis: redis_lib.Redis, unique_name: str) -> None:
    """Batches land while the reader reads: every read is one moment of the log (a separate XRANGE and
    state read would see a state ahead of its entries)."""
    writer = ReplayLogWriter(redis, unique_name, retention=400)
    reader = ReplayLogReader(redis, unique_name)
    done = threading.Event()

    def write() -> None:
        for batch in range(150):
            commit(writer, batch, batch * 13, 13, keys=11)
        done.set()

    thread = threading.Thread(target=write)
    thread.start()
    reads: list[History] = []
    try:
        while not done.is_set():
            reads.append(reader.history(150))
    finally:
        thread.join()
    reads.append(reader.history(150))
    assert len(reads) > 10
    for history in reads:
        check_consistent(history)
        assert len(history.entries) == min(150, history.seq)
    assert reads[-1].seq == 150 * 13
    assert len({history.seq for history in reads}) > 5, "the reads did not interleave with the commits"


def test_the_async_reader_reads_the_same(redis: redis_lib.Redis, redis_server: RedisServer,
                                         unique_name: str) -> None:
    writer = ReplayLogWriter(redis, unique_name)
    commit(writer, 0, 0, 40)

    async def read() -> tuple[History, History]:
        client = redis_async.Redis.from_url(redis_server.url)
        try:
            reader = AsyncReplayLogReader(client, StreamKeys(unique_name))
            return await reader.history(15), await reader.history(0)
        finally:
            await client.aclose()

    fifteen, none = asyncio.run(read())
    assert fifteen == ReplayLogReader(redis, unique_name).history(15)
    assert [e.seq for e in fifteen.entries] == list(range(26, 41))
    assert (none.entries, none.seq) == ([], 40)
