"""The real-time commit script (``lua/commit_rows.lua``) against a real Redis: re-sent rows commit once, seqs
stay gap-free across sources and with the micro-batch commit, the fence holds, the positions stay one per
source."""

from __future__ import annotations

import json

import pytest
import redis as redis_lib

from sparkwire.replaylog import PositionedRecord, Record, ReplayLogReader, ReplayLogWriter
from sparkwire.replaylog.writer import EpochFenced


def row(source: str, offset: int, index: int = 0) -> PositionedRecord:
    pid = f"{source}/{offset}" + (f"#{index}" if index else "")
    return PositionedRecord(source, offset, index, Record(pid, f"k-{source}", json.dumps({"offset": offset})))


def logged(reader: ReplayLogReader) -> list[tuple[int, str]]:
    return [(entry.seq, entry.processing_id) for entry in reader.iter_all()]


def test_rows_re_sent_after_a_failure_commit_once(redis: redis_lib.Redis, unique_name: str) -> None:
    """Spark re-sends a long batch's rows from its last committed offsets: those already in the log are
    refused in the step that would append them, and the rows after them are appended with the next seqs."""
    writer = ReplayLogWriter(redis, unique_name)
    reader = ReplayLogReader(redis, unique_name)
    for offset in range(5):  # one commit per row, as the writer sends them
        writer.commit_rows("q", 0, [row("orders/0", offset)])

    again = writer.commit_rows("q", 1, [row("orders/0", offset) for offset in range(8)])  # re-sent 0..4, new 5..7

    assert (again.appended, again.duplicates, again.first_seq, again.last_seq) == (3, 5, 6, 8)
    assert logged(reader) == [(n + 1, f"orders/0/{n}") for n in range(8)]
    meta = reader.meta()
    assert (meta.last_seq, meta.counters["records_committed"], meta.counters["duplicates_suppressed"]) == (8, 8, 5)
    assert redis.hgetall(writer.keys.positions) == {b"orders/0": b"7:0"}
    assert reader.snapshot().items["k-orders/0"].seq == 8  # the state holds the newest row of the key


def test_the_same_rows_committed_twice_commit_once(redis: redis_lib.Redis, unique_name: str) -> None:
    writer = ReplayLogWriter(redis, unique_name)
    rows = [row("t/0", 10), row("t/1", 3), row("t/0", 11), row("t/1", 4)]
    first = writer.commit_rows("q", 0, rows)
    second = writer.commit_rows("q", 0, rows)
    assert (first.appended, first.duplicates, second.appended, second.duplicates) == (4, 0, 0, 4)
    assert [seq for seq, _pid in logged(ReplayLogReader(redis, unique_name))] == [1, 2, 3, 4]
    assert redis.hgetall(writer.keys.positions) == {b"t/0": b"11:0", b"t/1": b"4:0"}


def test_several_rows_of_one_record_are_told_apart_by_their_index(redis: redis_lib.Redis, unique_name: str) -> None:
    """An explode makes several rows of one Kafka record: each is a row of its own, and a re-sent one is
    refused by its (offset, index)."""
    writer = ReplayLogWriter(redis, unique_name)
    writer.commit_rows("q", 0, [row("t/0", 7, 0), row("t/0", 7, 1)])
    again = writer.commit_rows("q", 1, [row("t/0", 7, 0), row("t/0", 7, 1), row("t/0", 7, 2), row("t/0", 8, 0)])
    assert (again.appended, again.duplicates) == (2, 2)
    assert [pid for _seq, pid in logged(ReplayLogReader(redis, unique_name))] == ["t/0/7", "t/0/7#1", "t/0/7#2",
                                                                                  "t/0/8"]


def test_seqs_are_gap_free_across_sources_and_writers(redis: redis_lib.Redis, unique_name: str) -> None:
    """Two tasks (one per Kafka partition), each with its own connection, commit interleaved: one seq order."""
    tasks = [ReplayLogWriter(redis_lib.Redis(connection_pool=redis.connection_pool), unique_name) for _ in range(2)]
    for offset in range(20):
        tasks[offset % 2].commit_rows("q", 0, [row(f"t/{offset % 2}", offset // 2)])
    assert [seq for seq, _pid in logged(ReplayLogReader(redis, unique_name))] == list(range(1, 21))


def test_rows_follow_micro_batches_in_one_seq_order(redis: redis_lib.Redis, unique_name: str) -> None:
    writer = ReplayLogWriter(redis, unique_name)
    batch = writer.commit_batch("q-batch", 0, [Record("b1", "k", "{}"), Record("b2", "k", "{}")])
    rows = writer.commit_rows("q-rt", 0, [row("t/0", 0)])
    assert rows.epoch == batch.chunks[-1].epoch
    assert logged(ReplayLogReader(redis, unique_name)) == [(1, "b1"), (2, "b2"), (3, "t/0/0")]


def test_a_writer_fenced_on_a_lost_epoch_writes_nothing(redis: redis_lib.Redis, unique_name: str) -> None:
    writer = ReplayLogWriter(redis, unique_name)
    epoch = writer.commit_rows("q", 0, [row("t/0", 0)]).epoch
    redis.delete(*writer.keys.all(), writer.keys.positions)  # Redis lost the log
    with pytest.raises(EpochFenced):
        writer.commit_rows("q", 0, [row("t/0", 1)], fence=epoch)
    assert redis.exists(*writer.keys.all()) == 0
    restarted = writer.commit_rows("q", 0, [row("t/0", 1)])  # unfenced (a new driver): a new epoch
    assert restarted.epoch != epoch and restarted.first_seq == 1


def test_retention_trims_the_log_and_the_ids_not_the_positions(redis: redis_lib.Redis, unique_name: str) -> None:
    writer = ReplayLogWriter(redis, unique_name, retention=3)
    for offset in range(10):
        writer.commit_rows("q", 0, [row("t/0", offset)])
    reader = ReplayLogReader(redis, unique_name)
    assert [seq for seq, _pid in logged(reader)] == [8, 9, 10]
    assert reader.meta().first_seq == 8 and redis.zcard(writer.keys.ids) == 3
    assert writer.commit_rows("q", 1, [row("t/0", 2)]).duplicates == 1  # below the position: still refused
