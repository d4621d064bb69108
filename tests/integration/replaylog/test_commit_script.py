"""The commit script against a real Redis: replays, duplicates, chunks, trimming, epochs."""

from __future__ import annotations

import json

import pytest
import redis as redis_lib

from sparkwire.replaylog import Record, ReplayLogReader, ReplayLogWriter
from sparkwire.replaylog.writer import EpochFenced, TailLost


def rec(i: int, key: str | None = None) -> Record:
    return Record(processing_id=f"pid-{i:05d}", key=key or f"k{i}", payload=json.dumps({"i": i}))


def seqs_and_ids(reader: ReplayLogReader) -> list[tuple[int, str]]:
    return [(e.seq, e.processing_id) for e in reader.iter_all()]


def test_first_commit_creates_the_epoch_and_gap_free_seqs(redis: redis_lib.Redis, unique_name: str) -> None:
    writer = ReplayLogWriter(redis, unique_name)
    reader = ReplayLogReader(redis, unique_name)
    assert reader.meta().epoch == ""

    result = writer.commit_batch("q1", 0, [rec(i) for i in range(5)])

    meta = reader.meta()
    assert meta.epoch and result.chunks[0].epoch == meta.epoch
    assert (meta.last_seq, meta.last_batch, meta.first_seq) == (5, 0, 1)
    assert seqs_and_ids(reader) == [(i + 1, f"pid-{i:05d}") for i in range(5)]
    assert meta.counters["records_committed"] == 5
    assert meta.counters["batches_committed"] == 1


def test_a_committed_batch_run_again_writes_nothing(redis: redis_lib.Redis, unique_name: str) -> None:
    writer = ReplayLogWriter(redis, unique_name, chunk_size=2)
    reader = ReplayLogReader(redis, unique_name)
    batch = [rec(i) for i in range(5)]
    writer.commit_batch("q1", 7, batch)
    before = seqs_and_ids(reader)

    again = writer.commit_batch("q1", 7, list(reversed(batch)))
    older = writer.commit_batch("q1", 6, [rec(100)])

    assert again.appended == 0 and again.replayed_chunks == 3
    assert older.appended == 0 and older.replayed_chunks == 1
    assert seqs_and_ids(reader) == before
    assert reader.meta().counters["chunks_replayed"] == 4


def test_ids_already_written_are_skipped_and_counted(redis: redis_lib.Redis, unique_name: str) -> None:
    writer = ReplayLogWriter(redis, unique_name)
    reader = ReplayLogReader(redis, unique_name)
    writer.commit_batch("q1", 0, [rec(1), rec(2)])

    result = writer.commit_batch("q1", 1, [rec(2), rec(3), rec(3), rec(1), rec(4)])

    assert (result.appended, result.duplicates) == (2, 3)
    assert seqs_and_ids(reader) == [(1, "pid-00001"), (2, "pid-00002"), (3, "pid-00003"), (4, "pid-00004")]
    assert reader.meta().counters["duplicates_suppressed"] == 3


def test_a_batch_cut_off_after_some_chunks_resumes_with_the_rest(
    redis: redis_lib.Redis, unique_name: str
) -> None:
    """The driver dies after chunk 0 of 3: nothing is visible; on the re-run chunk 0 is a replay and the
    last chunk appends the whole batch."""
    writer = ReplayLogWriter(redis, unique_name, chunk_size=3)
    reader = ReplayLogReader(redis, unique_name)
    batch = [rec(i) for i in range(8)]
    first_chunk = sorted(batch, key=lambda r: r.processing_id)[:3]
    writer._stage_chunk("q1", 0, 0, 3, first_chunk)
    assert (reader.meta().last_seq, redis.xlen(writer.keys.log)) == (0, 0)

    rerun = writer.commit_batch("q1", 0, batch)

    assert [c.status for c in rerun.chunks] == ["replayed", "staged", "committed"]
    assert seqs_and_ids(reader) == [(i + 1, f"pid-{i:05d}") for i in range(8)]
    assert reader.meta().counters["batches_committed"] == 1


def test_an_empty_batch_moves_the_marker(redis: redis_lib.Redis, unique_name: str) -> None:
    writer = ReplayLogWriter(redis, unique_name)
    reader = ReplayLogReader(redis, unique_name)
    writer.commit_batch("q1", 0, [rec(1)])
    writer.commit_batch("q1", 1, [])
    meta = reader.meta()
    assert (meta.last_batch, meta.last_seq) == (1, 1)


def test_the_log_and_the_ids_are_trimmed_together(redis: redis_lib.Redis, unique_name: str) -> None:
    writer = ReplayLogWriter(redis, unique_name, retention=5, chunk_size=4)
    reader = ReplayLogReader(redis, unique_name)
    for batch_id in range(3):
        writer.commit_batch("q1", batch_id, [rec(batch_id * 4 + i) for i in range(4)])

    meta = reader.meta()
    assert (meta.first_seq, meta.last_seq) == (8, 12)
    assert [e.seq for e in reader.iter_all()] == [8, 9, 10, 11, 12]
    assert redis.zcard(writer.keys.ids) == 5
    assert redis.zrangebyscore(writer.keys.ids, "-inf", "+inf", withscores=True)[0] == (b"pid-00007", 8.0)


def test_the_epoch_survives_new_writers_and_changes_when_the_log_is_lost(
    redis: redis_lib.Redis, unique_name: str
) -> None:
    ReplayLogWriter(redis, unique_name).commit_batch("q1", 0, [rec(1)])
    reader = ReplayLogReader(redis, unique_name)
    epoch = reader.meta().epoch

    ReplayLogWriter(redis, unique_name).commit_batch("q1", 1, [rec(2)])
    assert reader.meta().epoch == epoch

    redis.delete(*ReplayLogWriter(redis, unique_name).keys.all())
    ReplayLogWriter(redis, unique_name).commit_batch("q1", 2, [rec(3)])
    new_meta = reader.meta()
    assert new_meta.epoch != epoch
    assert new_meta.last_seq == 1


def test_a_new_query_restarts_batch_ids_but_keeps_id_dedup(redis: redis_lib.Redis, unique_name: str) -> None:
    writer = ReplayLogWriter(redis, unique_name)
    reader = ReplayLogReader(redis, unique_name)
    writer.commit_batch("old-checkpoint", 5, [rec(1), rec(2)])

    result = writer.commit_batch("new-checkpoint", 0, [rec(2), rec(3)])

    assert (result.appended, result.duplicates, result.replayed_chunks) == (1, 1, 0)
    meta = reader.meta()
    assert (meta.query_id, meta.last_batch, meta.counters["query_changes"]) == ("new-checkpoint", 0, 1)


def test_snapshot_holds_the_latest_result_per_key_at_the_last_seq(
    redis: redis_lib.Redis, unique_name: str
) -> None:
    writer = ReplayLogWriter(redis, unique_name)
    writer.commit_batch("q1", 0, [rec(1, "cpu"), rec(2, "mem")])
    writer.commit_batch("q1", 1, [rec(3, "cpu")])

    snapshot = ReplayLogReader(redis, unique_name).snapshot()

    assert snapshot.seq == 3
    assert {k: (v.seq, v.processing_id, v.data) for k, v in snapshot.items.items()} == {
        "cpu": (3, "pid-00003", {"i": 3}),
        "mem": (2, "pid-00002", {"i": 2}),
    }


def test_the_script_is_reloaded_after_redis_forgets_it(redis: redis_lib.Redis, unique_name: str) -> None:
    writer = ReplayLogWriter(redis, unique_name)
    writer.commit_batch("q1", 0, [rec(1)])
    redis.script_flush()
    assert writer.commit_batch("q1", 1, [rec(2)]).appended == 1


def test_a_chunk_or_a_publish_sent_twice_because_its_reply_was_lost_is_applied_once(
    redis: redis_lib.Redis, unique_name: str
) -> None:
    writer = ReplayLogWriter(redis, unique_name)
    first = writer._stage_chunk("q1", 0, 0, 1, [rec(1), rec(2)])
    second = writer._stage_chunk("q1", 0, 0, 1, [rec(1), rec(2)])
    assert first is not None and second is not None
    assert (first.status, second.status) == ("staged", "replayed")
    published = writer._publish_batch("q1", 0, 1, "")
    again = writer._publish_batch("q1", 0, 1, "")
    assert published is not None and again is not None
    assert (published.status, published.first_seq, published.last_seq) == ("committed", 1, 2)
    assert (again.status, again.appended) == ("replayed", 0)
    assert seqs_and_ids(ReplayLogReader(redis, unique_name)) == [(1, "pid-00001"), (2, "pid-00002")]


def test_a_batch_more_than_one_past_the_marker_is_a_lost_tail_and_writes_nothing(
    redis: redis_lib.Redis, unique_name: str
) -> None:
    """Spark hands batch N over only after N-1 was committed: a log whose marker is at N-2 lost N-1."""
    writer = ReplayLogWriter(redis, unique_name, chunk_size=2)
    reader = ReplayLogReader(redis, unique_name)
    writer.commit_batch("q1", 0, [rec(1)])
    writer.commit_batch("q1", 1, [rec(2)])
    epoch = reader.meta().epoch

    with pytest.raises(TailLost) as lost:
        writer.commit_batch("q1", 3, [rec(3), rec(4), rec(5)])

    assert (lost.value.epoch, lost.value.last_batch, lost.value.batch_id) == (epoch, 1, 3)
    assert seqs_and_ids(reader) == [(1, "pid-00001"), (2, "pid-00002")]
    assert redis.exists(writer.keys.staging) == 0
    # Another query's batch ids say nothing about this one's; a rebuild's ids may skip.
    assert writer.commit_batch("q2", 5, [rec(3)]).appended == 1
    assert writer.commit_batch("q2", 9, [rec(4)], consecutive=False).appended == 1


def test_a_lost_tail_gets_a_new_epoch_that_keeps_the_entries_before_the_hole(
    redis: redis_lib.Redis, unique_name: str
) -> None:
    writer = ReplayLogWriter(redis, unique_name)
    reader = ReplayLogReader(redis, unique_name)
    writer.commit_batch("q1", 0, [rec(1), rec(2)])
    old = reader.meta().epoch

    new = writer.mark_rebuild(None, 0, lost_tail_of=old)
    again = writer.mark_rebuild(None, 0, lost_tail_of=old)  # a retried call: the epoch was replaced already

    meta = reader.meta()
    assert new != old and again == new == meta.epoch
    assert meta.counters["tail_losses"] == 1 and meta.counters["rebuilds"] == 2
    assert seqs_and_ids(reader) == [(1, "pid-00001"), (2, "pid-00002")]
    # The marker that showed the loss went with the old epoch: the live query's next batch is not "behind".
    assert writer.commit_batch("q1", 5, [rec(4)], fence=new).last_seq == 3
    # A rebuild appends after the kept entries, fenced on the new epoch; ids already there are skipped.
    result = writer.commit_batch("rebuild:q1", 0, [rec(1), rec(2), rec(3)], fence=new, consecutive=False)
    assert (result.appended, result.duplicates, result.last_seq) == (1, 2, 4)


def test_a_log_behind_the_batch_this_writer_published_lost_it_even_under_another_querys_marker(
    redis: redis_lib.Redis, unique_name: str
) -> None:
    """After a rebuild the marker names ``rebuild:q1``; the live query's first batch after it is lost in a
    failover, the marker reverts to the rebuild's: the writer remembers publishing it and finds it gone."""
    writer = ReplayLogWriter(redis, unique_name)
    writer.commit_batch("rebuild:q1", 3, [rec(1)], consecutive=False)
    before = redis.dump(writer.keys.meta), redis.dump(writer.keys.log), redis.dump(writer.keys.ids)
    writer.commit_batch("q1", 4, [rec(2)])
    # The failover: the promoted replica has the log as it was before batch 4.
    for key, value in zip((writer.keys.meta, writer.keys.log, writer.keys.ids), before, strict=True):
        redis.restore(key, 0, value, replace=True)

    with pytest.raises(TailLost):
        writer.commit_batch("q1", 5, [rec(3)])
    # A log found in another epoch owes the writer nothing of what it published before.
    epoch = ReplayLogReader(redis, unique_name).meta().epoch
    redis.hset(writer.keys.meta, "epoch", "another")
    with pytest.raises(EpochFenced):
        writer.commit_batch("q1", 5, [rec(3)], fence=epoch)
    assert writer.commit_batch("q1", 5, [rec(3)], fence="another").appended == 1
    redis.hset(writer.keys.meta, "epoch", epoch)
    # A new driver does not know what was published before it: it cannot tell (docs/replay-log.md).
    for key, value in zip((writer.keys.meta, writer.keys.log, writer.keys.ids), before, strict=True):
        redis.restore(key, 0, value, replace=True)
    assert ReplayLogWriter(redis, unique_name).commit_batch("q1", 5, [rec(3)]).appended == 1
