"""The real aggregator writing through Sentinel to a replicated Redis (1 primary, 2 replicas, 3 sentinels)
whose primary is SIGKILLed twice mid-run: every failover is followed without a restart of anything, and
the log ends exactly as the independent oracle says, with every seq a reader saw holding the same entry
to the end (no rewrite under one epoch) and no lost tail.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from redis.exceptions import RedisError

from sparkwire.replaylog.keys import StreamKeys
from sparkwire.replaylog.redis_url import connect
from sparkwire_harness.stack import KafkaBroker, ReplicatedRedis
from sparkwire_harness.verify import compare

from .conftest import Pipeline
from .test_dependency_restarts import supervise_until

pytestmark = pytest.mark.slow

Seen = dict[tuple[str, int], tuple[bytes, bytes, bytes]]


@pytest.fixture
def replicated(tmp_path: Path) -> Iterator[ReplicatedRedis]:
    with ReplicatedRedis(tmp_path / "redis") as redis:
        yield redis


class LogWatcher(threading.Thread):
    """A reader as a gateway is one: follows the log through Sentinel, remembers every entry it read by
    (epoch, seq), re-reads the newest ones, and records any seq whose entry changed within an epoch."""

    def __init__(self, url: str, stream: str) -> None:
        super().__init__(daemon=True)
        self.client = connect(url, socket_timeout=2.0)
        self.keys = StreamKeys(stream)
        self.seen: Seen = {}
        self.rewrites: list[str] = []
        self.errors = 0
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.wait(0.05):
            try:
                epoch = self.client.hget(self.keys.meta, "epoch")
                newest = max((seq for (e, seq) in self.seen if e == (epoch or b"").decode()), default=0)
                entries = self.client.xrange(self.keys.log, f"{max(newest - 50, 0) + 1}-0", "+")
            except RedisError:
                self.errors += 1  # a failover in progress
                continue
            for entry_id, fields in entries:
                key = ((epoch or b"").decode(), int(entry_id.split(b"-")[0]))
                entry = (fields[b"pid"], fields[b"data"], fields[b"ts"])
                if key in self.seen and self.seen[key] != entry:
                    self.rewrites.append(f"{key}: {self.seen[key]!r} then {entry!r}")
                self.seen.setdefault(key, entry)


def test_primary_killed_twice_under_a_running_aggregator_loses_and_rewrites_nothing(
    replicated: ReplicatedRedis, kafka_broker: KafkaBroker, tmp_path: Path, unique_name: str
) -> None:
    kafka_broker.create_topic(f"{unique_name}-raw", partitions=2)
    kafka_broker.create_topic(f"{unique_name}-dlq", partitions=1)
    pipeline = Pipeline(unique_name, tmp_path / "pipeline", kafka_broker, replicated, redis_replicas=1,
                        max_offsets_per_trigger=150)
    pipeline.workdir.mkdir()
    # Three parts of 1,000 events: the first before the aggregator starts, each other one after a failover,
    # so that both failovers hit a run with results still to write (a whole backlog can be through before
    # the second one otherwise).
    pipeline.produce(1_000, duplicate_ratio=0.03, max_disorder_ms=200)
    watcher = LogWatcher(replicated.url, unique_name)
    exits: list[int] = []
    failovers: list[tuple[int, int, int]] = []  # (seq before, old port, new port)
    try:
        pipeline.start()
        watcher.start()
        at_seq = 5
        for _ in range(2):
            seq = pipeline.wait_for_seq(at_seq).last_seq
            old = replicated.kill_primary()
            new = replicated.wait_for_failover(old)
            failovers.append((seq, old.port, new.port))
            replicated.restart(old)  # it comes back as a replica of the new primary
            supervise_until(pipeline, time.monotonic() + 3, exits)
            at_seq = pipeline.reader.meta().last_seq + 1  # the next failover once the new part is being written
            pipeline.produce(1_000, duplicate_ratio=0.03, max_disorder_ms=200)
        expected = pipeline.expected()
        deadline = time.monotonic() + 240
        while pipeline.reader.meta().last_seq < len(expected) and time.monotonic() < deadline:
            supervise_until(pipeline, time.monotonic() + 1, exits)
        meta = pipeline.wait_until_idle()
        time.sleep(0.5)
    finally:
        watcher.done.set()
        for run in pipeline.runs:
            if run.alive:
                run.stop(timeout=30)

    report = compare(expected, list(pipeline.reader.iter_all()))
    assert report.ok, report.summary() + "\n" + pipeline.runs[-1].log_tail(60) + replicated.log_tail()
    assert meta.last_seq == len(expected)
    assert not watcher.rewrites, "entries changed under a seq a reader had seen:\n" + "\n".join(watcher.rewrites[:10])
    # One failure at a time, with WAIT 1: no tail is ever lost, so no new epoch either.
    assert meta.counters.get("tail_losses", 0) == 0 and len({epoch for epoch, _ in watcher.seen}) == 1
    assert len(watcher.seen) == len(expected)
    assert all(seq < len(expected) for seq, _, _ in failovers), f"a failover after the run ended: {failovers}"
    print(f"failovers (seq, old port, new port) {failovers}; aggregator exits {exits}; "
          f"watcher read errors {watcher.errors}")
