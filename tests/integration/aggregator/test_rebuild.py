"""A lost replay log rebuilt from Kafka, with real Kafka, Spark, Redis, a gateway and a Python client.

Redis wiped under a running aggregator (FLUSHALL, then a restart without its AOF) while a gateway serves
a connected client: the aggregator rebuilds the lost results before committing anything else, and the
log — and the client, after its snapshot resync — ends with exactly the independent oracle's results,
late events included: Spark's watermark keeps them, the sink drops them (their windows closed), and so does
the rebuild.
Past Kafka's retention (records deleted with the admin API) the rebuild publishes only windows it can
recompute exactly, marks the rest lost in the meta hash and counts it. ``sparkwire rebuild`` run by hand.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient

from sparkwire.client import BackgroundClient
from sparkwire.protocol.positions import Cursor
from sparkwire.replaylog.model import Entry
from sparkwire_harness.stack import GatewayProcess, KafkaBroker, RedisServer
from sparkwire_harness.verify import WindowResult, compare

from .conftest import DELAY_MS, START_MS, WINDOW_MS, Pipeline, wait_exit
from .test_exactly_once import scrape

pytestmark = pytest.mark.slow

LATE_MARGIN_MS = 5_000


@pytest.fixture
def own_redis(tmp_path: Path) -> Iterator[RedisServer]:
    with RedisServer(tmp_path / "redis") as server:
        yield server


def cursor_at(cursor: Cursor | None, epoch: str, seq: int) -> bool:
    """Whether a client's cursor ends at ``seq`` of ``epoch`` (whatever its digest, which the log's meta lacks)."""
    return cursor is not None and (cursor.epoch, cursor.seq) == (epoch, seq)


def restart_without_aof(server: RedisServer) -> None:
    server.kill()
    for name in ("appendonlydir", "appendonly.aof", "dump.rdb"):
        path = server.workdir / name
        if path.is_dir():
            shutil.rmtree(path)
        elif path.exists():
            path.unlink()
    server.start()


def latest_per_metric(expected: dict[str, WindowResult]) -> dict[str, str]:
    latest: dict[str, WindowResult] = {}
    for result in expected.values():
        if result.metric not in latest or result.window_end > latest[result.metric].window_end:
            latest[result.metric] = result
    return {metric: result.processing_id for metric, result in latest.items()}


def wait_for(condition: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.3)


def test_log_wiped_by_flushall_and_by_a_restart_without_aof_is_rebuilt_under_a_live_gateway_and_client(
    kafka_broker: KafkaBroker, own_redis: RedisServer, unique_name: str, tmp_path: Path
) -> None:
    kafka_broker.create_topic(f"{unique_name}-raw", partitions=2)
    kafka_broker.create_topic(f"{unique_name}-dlq", partitions=1)
    # Spark's watermark 20 s + the delay behind the newest event: it keeps the events 10 s late, which the sink
    # drops (their windows closed), and so must the rebuild — from Spark's watermark alone it would count them.
    pipeline = Pipeline(unique_name, tmp_path, kafka_broker, own_redis, chunk_size=3, max_offsets_per_trigger=150,
                        partition_skew_ms=20_000)
    # Two parts: 4,000 events before the aggregator starts, 2,000 after the restart without AOF, so that
    # the second loss hits a run with results still to write however fast the aggregator is.
    pipeline.produce(4_000, duplicate_ratio=0.03, max_disorder_ms=200, late_ratio=0.02, late_by_ms=10_000)
    gateway = GatewayProcess(tmp_path, own_redis.url, [unique_name]).start()
    watcher = BackgroundClient(gateway.ws(unique_name), keep_applied=True).start()
    try:
        run = pipeline.start()
        seq_at_flush = pipeline.wait_for_seq(30).last_seq
        own_redis.client().flushall()
        meta = pipeline.wait_for_seq(seq_at_flush + 1, timeout=240)  # rebuilt history, then a new batch
        seq_at_restart = meta.last_seq
        restart_without_aof(own_redis)
        pipeline.produce(2_000, duplicate_ratio=0.03, max_disorder_ms=200, late_ratio=0.02, late_by_ms=10_000)
        outcome = pipeline.outcome(LATE_MARGIN_MS)
        expected = outcome.results
        assert len(outcome.late_events) > 20 and len(expected) > 100
        pipeline.wait_for_seq(len(expected), timeout=300)
        meta = pipeline.wait_until_idle()
        wait_for(lambda: cursor_at(watcher.client.cursor, meta.epoch, meta.last_seq), 60,
                 f"the client at {meta.epoch}/{meta.last_seq}")
        metrics = scrape(pipeline.metrics_port)
        client = watcher.client
        stats = client.stats()
        state = {key: item.processing_id for key, item in client.state.items()}
        client_entries = [Entry(item.seq, item.processing_id, key, json.dumps(item.data), 0, 0)
                          for key, item in client.state.items()]
        applied = [pid for _seq, pid in client.applied]
    finally:
        watcher.stop()
        gateway.stop()
        for process in pipeline.runs:
            if process.alive:
                process.stop(timeout=60)

    entries = list(pipeline.reader.iter_all())
    report = compare(expected, entries)
    assert report.ok, report.summary() + "\n" + run.log_tail(40)
    assert meta.last_seq == len(expected) and seq_at_flush < seq_at_restart < len(expected)
    assert meta.counters.get("rebuilds") == 1 and "history_lost" not in meta.counters
    assert metrics['sparkwire_job_rebuilds_total{outcome="complete"}'] == 2
    assert metrics.get("sparkwire_job_rebuild_unavailable_total", 0) == 0
    # The late events went past Spark's watermark and were dropped by the sink (the case the rebuild must match).
    assert metrics["sparkwire_aggregator_late_events_total"] > 20
    assert len(pipeline.runs) == 1  # both rebuilds ran inside the running aggregator, which never exited
    # The client resynced by snapshot after each loss and holds the latest window of every metric,
    # with the oracle's values; nothing it applied was applied twice or is not an expected result.
    assert sum(stats.resets.values()) >= 2, stats.resets
    assert state == latest_per_metric(expected)
    values = compare(expected, client_entries)
    assert not (values.value_mismatches or values.unexpected or values.duplicated), values.summary()
    assert len(applied) == len(set(applied)) and set(applied) <= set(expected)


def delete_before(bootstrap: str, topic: str, offsets: dict[int, int]) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.delete_records([TopicPartition(topic, p, o) for p, o in offsets.items()],
                                   request_timeout=30)
    for future in futures.values():
        future.result(30)


def read_records(bootstrap: str, topic: str, offsets: dict[int, int]) -> list[str]:
    """The values of ``[0, offsets[p])`` of every partition."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"read-{topic}", "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, p, 0) for p in offsets])
    values: list[str] = []
    newest = dict.fromkeys(offsets, -1)
    deadline = time.monotonic() + 30
    while any(newest[p] < offsets[p] - 1 for p in offsets) and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is None or message.error() is not None:
            continue
        newest[message.partition()] = message.offset()
        if message.offset() < offsets[message.partition()]:
            values.append(message.value().decode())
    consumer.close()
    assert len(values) == sum(offsets.values())
    return values


def rebuild_command(pipeline: Pipeline) -> list[str]:
    return [sys.executable, "-m", "sparkwire.cli", "rebuild", "--bootstrap-servers", pipeline.kafka.bootstrap,
            "--topic", pipeline.topic, "--redis-url", pipeline.redis_server.url, "--stream", pipeline.name,
            "--checkpoint", str(pipeline.workdir / "checkpoint"), "--window-ms", str(WINDOW_MS),
            "--watermark-delay-ms", str(DELAY_MS), "--chunk-size", "3"]


def test_sparkwire_rebuild_by_hand_and_past_kafkas_retention(pipeline: Pipeline) -> None:
    pipeline.produce(2_500, duplicate_ratio=0.03, max_disorder_ms=200)
    expected = pipeline.expected()
    run = pipeline.start()
    pipeline.wait_for_seq(len(expected))
    pipeline.wait_until_idle()
    run.stop(timeout=60)
    assert wait_exit(run, 5) == 0
    reader = pipeline.reader
    reader.client.delete(*reader.keys.all(), reader.keys.staging)  # the stream's log lost

    done = subprocess.run(rebuild_command(pipeline), capture_output=True, text=True, timeout=300, check=False)
    print(done.stdout, done.stderr[-2000:])
    assert done.returncode == 0, done.stderr[-3000:]
    assert "history complete" in done.stdout and f"{len(expected)} results appended" in done.stdout
    report = compare(expected, list(reader.iter_all()))
    assert report.ok, report.summary()
    meta = reader.meta()
    assert meta.query_id.startswith("rebuild:") and meta.counters["rebuilds"] == 1
    # Again: nothing to add, every result is already there.
    again = subprocess.run(rebuild_command(pipeline), capture_output=True, text=True, timeout=300, check=False)
    assert again.returncode == 0 and "0 results appended" in again.stdout, again.stdout + again.stderr[-2000:]
    assert compare(expected, list(reader.iter_all())).ok

    # Past retention: the first 400 records of each partition deleted from Kafka, and the log lost again.
    cut = {0: 400, 1: 400}
    deleted = [json.loads(v) for v in read_records(pipeline.kafka.bootstrap, pipeline.topic, cut)]
    newest_deleted = max(d["timestamp"] for d in deleted if isinstance(d, dict) and "timestamp" in d)
    delete_before(pipeline.kafka.bootstrap, pipeline.topic, cut)
    reader.client.delete(*reader.keys.all(), reader.keys.staging)
    lost = subprocess.run(rebuild_command(pipeline), capture_output=True, text=True, timeout=300, check=False)
    print(lost.stdout, lost.stderr[-2000:])
    assert lost.returncode == 3, lost.stderr[-3000:]
    assert "ERROR history lost" in lost.stderr and "past Kafka's retention" in lost.stderr
    meta = reader.meta()
    bound = meta.counters["history_lost_before_ms"]
    assert meta.counters["history_lost"] == 1 and meta.counters["history_lost_records"] == 800
    # Sound: no window a deleted record fed is published; exact: what is published is the oracle's, and
    # every window after the bound is there.
    assert bound >= newest_deleted > START_MS
    kept = {pid: r for pid, r in expected.items() if r.window_start > bound}
    assert 0 < len(kept) < len(expected)
    report = compare(kept, list(reader.iter_all()))
    assert report.ok, report.summary()

    # The same loss found by the aggregator itself (the log lost while it was down, new input arrives):
    # it rebuilds what it can, counts the rest and marks it, then goes on with the new input.
    reader.client.delete(*reader.keys.all(), reader.keys.staging)
    pipeline.produce(300, start_ms=START_MS + 600_000)
    restarted = pipeline.start()
    pipeline.wait_for_seq(len(kept) + 1)
    metrics = scrape(pipeline.metrics_port)
    restarted.stop(timeout=60)
    assert metrics["sparkwire_job_rebuild_unavailable_total"] == 1
    assert metrics['sparkwire_job_rebuilds_total{outcome="partial"}'] == 1
    meta = reader.meta()
    assert (meta.counters["history_lost"], meta.counters["history_lost_before_ms"]) == (1, bound)
    entries = list(reader.iter_all())
    assert compare(kept, [e for e in entries if e.processing_id in expected]).ok
    assert all(e.processing_id not in expected for e in entries[len(kept):])  # the new input after it
