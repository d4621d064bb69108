"""Redis SIGKILLed and Kafka restarted under a running aggregator: still exactly once.

Each test here gets its own Redis and Kafka (restarting the session's would disturb other tests). The
aggregator is supervised like the Spark operator would: when it exits, it is started again on its
checkpoint.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from sparkwire_harness.stack import KafkaBroker, RedisServer
from sparkwire_harness.verify import compare

from .conftest import Pipeline

pytestmark = pytest.mark.slow


@pytest.fixture
def own_servers(tmp_path: Path) -> Iterator[tuple[KafkaBroker, RedisServer]]:
    with KafkaBroker(tmp_path / "kafka") as kafka, RedisServer(tmp_path / "redis") as redis_server:
        yield kafka, redis_server


def supervise_until(pipeline: Pipeline, done: float, exits: list[int]) -> None:
    """Keep one aggregator running (restarting it when it exits) until ``done`` (a monotonic deadline)."""
    while time.monotonic() < done:
        if not pipeline.runs[-1].alive:
            exits.append(pipeline.runs[-1].returncode or 0)
            pipeline.start()
        time.sleep(0.3)


def test_redis_killed_and_kafka_restarted_mid_run_lose_and_repeat_nothing(
    own_servers: tuple[KafkaBroker, RedisServer], tmp_path: Path, unique_name: str
) -> None:
    kafka, redis_server = own_servers
    kafka.create_topic(f"{unique_name}-raw")
    kafka.create_topic(f"{unique_name}-dlq", partitions=1)
    # 100 records a batch, three parts of 1,000 events: the first before the aggregator starts, each other
    # one after a fault, so that both faults hit a run with results still to write however fast it goes.
    pipeline = Pipeline(unique_name, tmp_path / "pipeline", kafka, redis_server, max_offsets_per_trigger=100)
    pipeline.workdir.mkdir()
    pipeline.produce(1_000, duplicate_ratio=0.03, max_disorder_ms=200)
    exits: list[int] = []
    try:
        pipeline.start()
        seq_at_redis_kill = pipeline.wait_for_seq(5).last_seq

        redis_server.kill()  # SIGKILL: only what the AOF (appendfsync always) holds survives
        time.sleep(2)
        redis_server.start()
        supervise_until(pipeline, time.monotonic() + 3, exits)
        seq_after_redis = pipeline.reader.meta().last_seq
        pipeline.produce(1_000, duplicate_ratio=0.03, max_disorder_ms=200)

        kafka.restart()
        supervise_until(pipeline, time.monotonic() + 3, exits)
        pipeline.produce(1_000, duplicate_ratio=0.03, max_disorder_ms=200)
        expected = pipeline.expected()

        deadline = time.monotonic() + 240
        while pipeline.reader.meta().last_seq < len(expected) and time.monotonic() < deadline:
            supervise_until(pipeline, time.monotonic() + 1, exits)
        meta = pipeline.wait_until_idle()
    finally:
        for run in pipeline.runs:
            if run.alive:
                run.stop(timeout=30)

    report = compare(expected, list(pipeline.reader.iter_all()))
    assert report.ok, report.summary() + "\n" + pipeline.runs[-1].log_tail(60)
    assert meta.last_seq == len(expected)
    # Both faults hit a run in progress, not a finished one.
    assert 5 <= seq_at_redis_kill <= seq_after_redis < len(expected)
    print(f"aggregator exits {exits}; seq at Redis kill {seq_at_redis_kill}, at Kafka restart {seq_after_redis}")
    assert all(code != 0 for code in exits), "an aggregator only exits on failure"
