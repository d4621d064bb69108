"""The writer across a Redis failover, against a real primary and a real replica whose replication link runs
through toxiproxy: a blackholed link is a replica that has not received the last writes when the primary dies.

What a client can have seen is what the primary's log held; after the replica is promoted, the log must hold
the same entries under the same seqs, or the loss must be detected (never a silent hole or a rewrite).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import pytest
import redis as redis_lib

from sparkwire.replaylog import Record, ReplayLogWriter
from sparkwire.replaylog.writer import CommitEvents, NotReplicated, TailLost
from sparkwire_harness.chaos.toxiproxy import Toxiproxy
from sparkwire_harness.stack import RedisServer

pytestmark = pytest.mark.slow


def rec(i: int, value: float = 0.0) -> Record:
    return Record(processing_id=f"pid-{i:05d}", key=f"k{i % 3}", payload=json.dumps({"i": i, "v": value}))


@dataclass
class Pair:
    primary: RedisServer
    replica: RedisServer
    toxiproxy: Toxiproxy

    def client(self, server: RedisServer) -> redis_lib.Redis:
        return redis_lib.Redis(host="127.0.0.1", port=server.port, socket_timeout=5.0)

    def cut_replication(self) -> list[str]:
        """The replica stops receiving the primary's writes; neither side notices (a blackhole)."""
        return self.toxiproxy.add_fault("replication", "cut", "blackhole", {})

    def fail_over(self) -> redis_lib.Redis:
        """The primary dies; the replica is promoted with what it has (as Sentinel would)."""
        self.primary.kill()
        promoted = self.client(self.replica)
        promoted.replicaof("NO", "ONE")
        return promoted


@pytest.fixture
def pair(tmp_path: Path, toxiproxy: Toxiproxy) -> Iterator[Pair]:
    with RedisServer(tmp_path / "primary") as primary, RedisServer(tmp_path / "replica") as replica:
        link = toxiproxy.create_proxy("replication", primary.port)
        redis_lib.Redis(host="127.0.0.1", port=primary.port).config_set("repl-diskless-sync-delay", 0)
        replica_client = redis_lib.Redis(host="127.0.0.1", port=replica.port)
        replica_client.replicaof("127.0.0.1", link)
        deadline = time.monotonic() + 20
        while replica_client.info("replication").get("master_link_status") != "up":
            assert time.monotonic() < deadline, f"the replica never synced:\n{replica.log_tail()}"
            time.sleep(0.05)
        yield Pair(primary, replica, toxiproxy)


def entries(client: redis_lib.Redis, writer: ReplayLogWriter) -> list[tuple[bytes, dict[bytes, bytes]]]:
    return list(client.xrange(writer.keys.log))


def test_a_batch_no_replica_acknowledged_is_never_published(pair: Pair, unique_name: str) -> None:
    writer = ReplayLogWriter(pair.client(pair.primary), unique_name, replicas=1, replica_timeout_ms=300,
                             retry_for_seconds=1.0)
    writer.commit_batch("q1", 0, [rec(1), rec(2)])
    pair.cut_replication()

    with pytest.raises(NotReplicated):
        writer.commit_batch("q1", 1, [rec(3), rec(4)])
    seen = entries(pair.client(pair.primary), writer)  # what a gateway could have delivered
    assert [entry_id for entry_id, _ in seen] == [b"1-0", b"2-0"]

    promoted = pair.fail_over()
    # Spark did not see batch 1 succeed, so it runs it again, here on the promoted replica.
    after = ReplayLogWriter(promoted, unique_name, replicas=0).commit_batch("q1", 1, [rec(3), rec(4)])
    assert (after.appended, after.last_seq) == (2, 4)
    assert entries(promoted, writer)[:2] == seen


def test_a_publish_the_replica_missed_is_published_again_with_the_same_seqs_and_bytes(
    pair: Pair, unique_name: str
) -> None:
    """The staged batch reached the replica, its publish did not: clients saw the batch on the old primary.
    Spark re-runs the batch after the failover and computes slightly different values (floating point sums
    in another order): what is published is still exactly what the clients saw."""
    writer = ReplayLogWriter(pair.client(pair.primary), unique_name, chunk_size=2, replicas=1,
                             replica_timeout_ms=300, retry_for_seconds=1.0)
    writer.commit_batch("q1", 0, [rec(1), rec(2)])
    batch = [rec(i, value=0.1 + 0.2) for i in range(3, 8)]  # 3 chunks
    for index, chunk in enumerate(chunks := [batch[0:2], batch[2:4], batch[4:5]]):
        # WAITed at the last; retried as the writer retries its calls (a loaded machine can miss 300 ms)
        assert writer._call(partial(writer._stage_chunk, "q1", 1, index, len(chunks), chunk)) is not None
    pair.cut_replication()
    with pytest.raises(NotReplicated):
        writer._publish_batch("q1", 1, len(chunks), "")
    seen = entries(pair.client(pair.primary), writer)
    assert len(seen) == 7

    promoted = pair.fail_over()
    assert len(entries(promoted, writer)) == 2  # the replica lacks the publish...
    rerun = [rec(i, value=0.3) for i in range(3, 8)]  # ...and Spark's re-run differs in the last bit
    result = ReplayLogWriter(promoted, unique_name, chunk_size=2).commit_batch("q1", 1, rerun)

    assert [c.status for c in result.chunks] == ["replayed", "replayed", "committed"]
    assert entries(promoted, writer) == seen


class Recorded(CommitEvents):
    def __init__(self) -> None:
        self.not_replicated_calls: list[tuple[int, int]] = []
        self.republished_calls: list[tuple[str, int]] = []

    def not_replicated(self, acknowledged: int, required: int) -> None:
        self.not_replicated_calls.append((acknowledged, required))

    def republished(self, query_id: str, batch_id: int) -> None:
        self.republished_calls.append((query_id, batch_id))


def _staged_then_publish_not_replicated(
    pair: Pair, writer: ReplayLogWriter, batch: list[Record], events: Recorded
) -> list[str]:
    """Batch 1 staged and replicated; its publish made on the primary but no replica acknowledged it."""
    chunks = [batch[0:2], batch[2:4], batch[4:5]]
    for index, chunk in enumerate(chunks):
        # Retried as the writer retries its calls: on a loaded machine a healthy replica can miss the 300 ms
        # of a WAIT (CI saw it for batch 0).
        assert writer._call(partial(writer._stage_chunk, "q1", 1, index, len(chunks), chunk)) is not None
    events.not_replicated_calls.clear()  # only what the publish meets is the tests' subject
    cut = pair.cut_replication()
    with pytest.raises(NotReplicated):
        writer._publish_batch("q1", 1, len(chunks), "")
    return cut


def test_the_writer_reports_a_publish_lost_in_a_failover_and_published_again(pair: Pair, unique_name: str) -> None:
    """The same writer (as a sink's, whose Sentinel client follows the failover) sends the batch again: the
    promoted replica lacked the publish, so it is published again, and the writer says so."""
    pool = redis_lib.ConnectionPool(host="127.0.0.1", port=pair.primary.port, socket_timeout=5.0)
    events = Recorded()
    writer = ReplayLogWriter(redis_lib.Redis(connection_pool=pool), unique_name, chunk_size=2, replicas=1,
                             replica_timeout_ms=300, retry_for_seconds=1.0, events=events)
    writer.commit_batch("q1", 0, [rec(1), rec(2)])
    batch = [rec(i) for i in range(3, 8)]
    _staged_then_publish_not_replicated(pair, writer, batch, events)
    assert events.not_replicated_calls == [(0, 1)] and events.republished_calls == []

    pair.fail_over()
    pool.connection_kwargs["port"] = pair.replica.port  # what a Sentinel-managed pool does on reconnect
    pool.reset()  # its connections, which know the old port, are dropped
    writer.replicas = 0  # the promoted replica has no replica of its own in this pair
    result = writer.commit_batch("q1", 1, batch)

    assert [c.status for c in result.chunks] == ["replayed", "replayed", "committed"]
    assert events.republished_calls == [("q1", 1)]
    assert writer.commit_batch("q1", 1, batch).chunks[-1].status == "replayed"  # Spark's re-run: nothing new
    assert events.republished_calls == [("q1", 1)]


def test_a_publish_the_replica_received_late_is_not_reported_as_published_again(
    pair: Pair, unique_name: str
) -> None:
    events = Recorded()
    writer = ReplayLogWriter(pair.client(pair.primary), unique_name, chunk_size=2, replicas=1,
                             replica_timeout_ms=300, retry_for_seconds=5.0, events=events)
    writer.commit_batch("q1", 0, [rec(1), rec(2)])
    batch = [rec(i) for i in range(3, 8)]
    cut = _staged_then_publish_not_replicated(pair, writer, batch, events)
    pair.toxiproxy.remove("replication", cut)  # no failover: the replica reconnects and catches up

    result = writer.commit_batch("q1", 1, batch)

    assert result.chunks[-1].status == "replayed"
    assert events.republished_calls == [] and events.not_replicated_calls[0] == (0, 1)


def test_a_tail_lost_in_a_failover_is_detected_before_anything_is_appended_after_it(
    pair: Pair, unique_name: str
) -> None:
    """Without waiting for replicas (as before this test existed), batch 1 returns as committed, the
    failover loses it, and batch 2 would be appended after the hole under the same epoch: silent loss."""
    writer = ReplayLogWriter(pair.client(pair.primary), unique_name, replicas=0)
    writer.commit_batch("q1", 0, [rec(1), rec(2)])
    assert pair.client(pair.primary).wait(1, 5_000) == 1  # batch 0 reached the replica: only batch 1 is lost
    pair.cut_replication()
    writer.commit_batch("q1", 1, [rec(3), rec(4)])  # returns: Spark goes on to batch 2
    epoch = pair.client(pair.primary).hget(writer.keys.meta, "epoch")

    promoted = pair.fail_over()
    after = ReplayLogWriter(promoted, unique_name)
    with pytest.raises(TailLost) as lost:
        after.commit_batch("q1", 2, [rec(5)])

    assert (lost.value.epoch.encode(), lost.value.last_batch) == (epoch, 0)
    assert [entry_id for entry_id, _ in entries(promoted, writer)] == [b"1-0", b"2-0"]


def test_a_primary_without_its_replicas_refuses_the_commit_until_one_is_back_and_the_writer_retries(
    pair: Pair, unique_name: str
) -> None:
    """min-replicas-to-write 1 (the replicated topology's setting): a primary whose replica is gone answers
    NOREPLICAS, which the writer retries (in a pipeline with WAIT too) until the replica is back."""
    primary = pair.client(pair.primary)
    primary.config_set("min-replicas-to-write", 1)
    primary.config_set("min-replicas-max-lag", 1)
    writer = ReplayLogWriter(primary, unique_name, replicas=1, replica_timeout_ms=300, retry_for_seconds=20.0)
    writer.commit_batch("q1", 0, [rec(1)])
    replica = pair.client(pair.replica)
    replica.replicaof("NO", "ONE")  # the replica leaves; the primary sees it gone at once

    threading.Timer(2.0, lambda: replica.replicaof("127.0.0.1", pair.toxiproxy.listen_ports["replication"])).start()
    started = time.monotonic()
    result = writer.commit_batch("q1", 1, [rec(2)])

    assert result.appended == 1 and time.monotonic() - started >= 1.5
    assert primary.info("commandstats").get("cmdstat_evalsha", {}).get("failed_calls", 0) > 0


def test_the_writers_other_calls_outlast_a_broken_link_too(pair: Pair, unique_name: str) -> None:
    """The descriptor, the epoch lookup and mark_rebuild are retried like a commit (a job's first batch may
    meet a failover: it writes the descriptor first)."""
    link = pair.toxiproxy.create_proxy("writer", pair.primary.port)
    writer = ReplayLogWriter(redis_lib.Redis(host="127.0.0.1", port=link, socket_timeout=1.0), unique_name,
                             retry_for_seconds=10.0)
    toxics = pair.toxiproxy.add_fault("writer", "down", "reset", {})
    threading.Timer(1.5, lambda: pair.toxiproxy.remove("writer", toxics)).start()
    started = time.monotonic()

    writer.put_descriptor('{"stream":"s"}')
    epoch = writer.mark_rebuild(None, 0)

    assert time.monotonic() - started >= 1.0
    assert writer.stream_epoch() == (epoch, "")
    assert pair.client(pair.primary).get(writer.keys.descriptor) == b'{"stream":"s"}'
