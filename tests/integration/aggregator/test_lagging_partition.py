"""Issue 38: a lagging Kafka partition costs nothing, with real Kafka (2 partitions), Spark and Redis.

Partition 0 is read far ahead (more than two delays) while partition 1 sends nothing new — as after a
leader failover or through a backlog — and then partition 1's records for the same windows come. The sink
holds those windows open for partition 1 (per-partition progress), so every window is complete and no
event is counted late. The sink of 9d11b91 closed them from the batch's newest event time and dropped
partition 1's events.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from confluent_kafka import Producer

from sparkwire_harness.verify import compare, expected_outcome

from .conftest import DELAY_MS, START_MS, WINDOW_MS, Pipeline
from .test_exactly_once import scrape

pytestmark = pytest.mark.slow

RATE_PER_S = 50  # events per second of event time, per partition
AHEAD_MS = 8_000  # how far partition 0 is read ahead of partition 1: over five delays
# Spark's own watermark is global: it must keep partition 1's rows that far behind (--partition-skew-ms; its
# default, twice the delay, would have Spark drop them as behind its watermark, before the sink sees them).
SKEW_MS = 15_000
# Partition 1 is silent (on purpose) from the first batch that reads partition 0 ahead until its own records
# come: far longer than the test's own deadlines allow, so a slow machine never has it released as idle
# (--partition-idle-ms, 60 s by default), which would close the windows on partition 0's progress alone.
IDLE_MS = 900_000


def events(partition: int, start_ms: int, end_ms: int) -> list[tuple[int, str]]:
    step = 1000 // RATE_PER_S
    return [(partition, json.dumps({"timestamp": t, "metricName": f"metric-{(t // step) % 3}", "value": t % 97,
                                    "sourceId": f"source-{partition}", "eventId": f"p{partition}-{t}"}))
            for t in range(start_ms, end_ms, step)]


def heartbeat(partition: int, timestamp_ms: int) -> tuple[int, str]:
    return partition, json.dumps({"type": "heartbeat", "timestamp": timestamp_ms})


def send(bootstrap: str, topic: str, records: list[tuple[int, str]]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for partition, value in records:
        producer.produce(topic, value=value, partition=partition)
    assert producer.flush(30) == 0


def windows_files(pipeline: Pipeline) -> list[Path]:
    """The sink's window-state files, by batch."""
    directory = pipeline.workdir / "checkpoint" / "aggregate" / "sparkwire" / "windows"
    return sorted(directory.glob("*.json"), key=lambda p: int(p.stem))


def progress(pipeline: Pipeline) -> dict[int, int]:
    """Each partition's event-time progress in the sink's newest window-state file."""
    files = windows_files(pipeline)
    if not files:
        return {}
    document = json.loads(files[-1].read_text())
    return {int(partition): int(event_time) for partition, event_time, *_ in document.get("partitions", [])}


def wait_for_progress(pipeline: Pipeline, partition: int, event_time_ms: int, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while progress(pipeline).get(partition, -1) < event_time_ms:
        assert pipeline.runs[-1].alive, pipeline.runs[-1].log_tail(80)
        assert time.monotonic() < deadline, f"partition {partition} never read to {event_time_ms}"
        time.sleep(0.2)


def test_a_partition_read_two_delays_behind_the_other_loses_nothing(pipeline: Pipeline) -> None:
    # Options of the aggregator's command line: an environment variable would be overridden by its flag.
    pipeline.partition_skew_ms, pipeline.partition_idle_ms = SKEW_MS, IDLE_MS
    start = START_MS + 1_000_000  # the first window's start, on a window boundary
    both = events(0, start, start + 1_000) + events(1, start, start + 1_000)
    ahead = events(0, start + 1_000, start + 1_000 + AHEAD_MS)
    behind = events(1, start + 1_000, start + 1_000 + AHEAD_MS)
    end = start + 1_000 + AHEAD_MS
    closing = [heartbeat(0, end + 2 * DELAY_MS), heartbeat(1, end + 2 * DELAY_MS)]

    send(pipeline.kafka.bootstrap, pipeline.topic, both)
    run = pipeline.start()
    last_of_both = start + 1_000 - 1000 // RATE_PER_S
    wait_for_progress(pipeline, 0, last_of_both)
    wait_for_progress(pipeline, 1, last_of_both)  # both partitions known to the sink
    send(pipeline.kafka.bootstrap, pipeline.topic, ahead)
    wait_for_progress(pipeline, 0, end - 1000 // RATE_PER_S)  # partition 0 read over five delays ahead
    send(pipeline.kafka.bootstrap, pipeline.topic, behind + closing)

    outcome = expected_outcome(both + ahead + behind + closing, WINDOW_MS, DELAY_MS)
    assert outcome.late_events == [] and len(outcome.results) == 3 * (AHEAD_MS // WINDOW_MS + 1)
    pipeline.wait_for_seq(len(outcome.results), timeout=60)
    meta = pipeline.wait_until_idle(quiet_seconds=2.0)
    metrics = scrape(pipeline.metrics_port)
    run.stop(timeout=60)

    # Where events went missing, first: behind Spark's watermark (the skew), or late by the sink's rule.
    dropped = {name: metrics.get(f"sparkwire_aggregator_{name}_total", 0.0) for name in ("late_rows_dropped",
                                                                                        "late_events")}
    assert dropped == {"late_rows_dropped": 0, "late_events": 0}, dropped
    report = compare(outcome.results, list(pipeline.reader.iter_all()))
    assert report.ok, report.summary()
    assert meta.last_seq == len(outcome.results)
    idle = [path.stem for path in windows_files(pipeline)
            if any(idle for *_, idle in json.loads(path.read_text())["partitions"])]
    assert idle == [], f"a partition was idle after batches {idle}"
