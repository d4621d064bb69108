"""The aggregator end to end with real Kafka, Spark and Redis: the replay log holds exactly the expected
window results, once each, with gap-free seqs, whatever the input and wherever the driver is killed.

Expected results come from ``sparkwire_harness.verify.expected_results`` over the produced records: plain
Python, no Spark."""

from __future__ import annotations

import json
import random
import time
import urllib.request

import pytest
from confluent_kafka import Consumer, TopicPartition

from sparkwire.aggregator.window_state import WindowStateFiles
from sparkwire.aggregator.windows import NO_BOUND
from sparkwire.protocol.items import Entry
from sparkwire.spark.rebuild.checkpoint import read_history
from sparkwire_harness.verify import compare, read_produced
from sparkwire_harness.verify.expected import parse_event, parse_heartbeat

from .conftest import DELAY_MS, WINDOW_MS, Pipeline, wait_exit

pytestmark = pytest.mark.slow

EVENTS = 3_000


def scrape(port: int) -> dict[str, float]:
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    samples = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            samples[name] = float(value)
    return samples


def scrape_until(port: int, name: str, value: float, timeout: float = 30) -> dict[str, float]:
    """The metrics once ``name`` reached ``value`` (or at the timeout): the dead-letter query, which counts
    malformed records, runs on a trigger of its own (10 s by default), so its counts trail the main query's."""
    deadline = time.monotonic() + timeout
    samples = scrape(port)
    while samples.get(name, 0.0) < value and time.monotonic() < deadline:
        time.sleep(0.5)
        samples = scrape(port)
    return samples


def consume_all(bootstrap: str, topic: str, expected: int, timeout: float = 30) -> list[bytes]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"check-{topic}",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([topic])
    values: list[bytes] = []
    deadline = time.monotonic() + timeout
    try:
        while len(values) < expected and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                values.append(message.value())
    finally:
        consumer.close()
    return values


def produced(pipeline: Pipeline, kind: str) -> list[str]:
    return [r.value for r in read_produced(pipeline.events_file) if r.kind == kind]


def assert_batch_staged_not_visible(pipeline: Pipeline, batch_id: int) -> None:
    """The driver died between two chunks of ``batch_id``: its first chunk is staged and none of it is in
    the log, the state or the meta a gateway reads."""
    reader = pipeline.reader
    client, keys = reader.client, reader.keys
    staging = {k.decode(): v for k, v in client.hgetall(keys.staging).items()}
    assert int(staging["batch"]) == batch_id and int(staging["next"]) >= 1, staging.keys()
    meta = reader.meta()
    assert meta.last_batch == batch_id - 1
    entries = list(reader.iter_all())
    assert entries and all(e.batch_id < batch_id for e in entries)
    assert (entries[-1].seq, reader.snapshot().seq) == (meta.last_seq, meta.last_seq)
    assert max(item.seq for item in reader.snapshot().items.values()) == meta.last_seq


def read_partitions(bootstrap: str, topic: str, ends: dict[int, int], timeout: float = 30) -> dict[int, dict[int, str]]:
    """The records of ``topic`` below offset ``ends[p]`` of each partition ``p``: by partition, by offset."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"offsets-{topic}",
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, partition, 0) for partition in ends])
    records: dict[int, dict[int, str]] = {partition: {} for partition in ends}
    reached = {partition: 0 for partition in ends}  # the offset after the last record read
    deadline = time.monotonic() + timeout
    try:
        while any(reached[p] < ends[p] for p in ends):
            assert time.monotonic() < deadline, (reached, ends)
            message = consumer.poll(0.5)
            if message is None or message.error() is not None:
                continue
            partition, offset, value = message.partition(), message.offset(), message.value()
            assert partition is not None and offset is not None and value is not None
            reached[partition] = max(reached[partition], offset + 1)
            if offset < ends[partition]:
                records[partition][offset] = value.decode()
    finally:
        consumer.close()
    return records


def event_time(raw: str) -> int | None:
    """The event time a record moves its partition to (an event's or a heartbeat's), by the oracle's parsing."""
    beat = parse_heartbeat(raw)
    if beat is not None:
        return beat
    event = parse_event(raw)
    return None if event is None else event.timestamp


def assert_closed_by_the_slowest_partition(pipeline: Pipeline, entries: list[Entry], late_rows_dropped: float) -> None:
    """The closing rule, checked from the checkpoint against what each batch read from Kafka
    (docs/replay-log.md, "When a window closes"):

    * after each batch, the sink's ``closedUpto`` is the slowest partition's event-time progress minus the
      delay (never going back), each partition's progress being the newest event time among the Kafka
      records that batch and the ones before it read from it (offsets from the checkpoint, records from
      Kafka, parsed by the oracle); no partition goes idle in this run;
    * Spark's watermark for batch b+1 (delay + partition skew behind the newest partition) drops no row the
      sink would still have taken: every event time at or below it is in a window the bound after b closed.
      Spark dropped nothing here, so the progress above is the sink's whole input;
    * each window is committed by the first batch whose bound reached its end.
    """
    assert late_rows_dropped == 0
    checkpoint = pipeline.workdir / "checkpoint" / "aggregate"
    bounds = WindowStateFiles(checkpoint, WINDOW_MS, DELAY_MS).closed_upto()
    history = read_history(checkpoint, pipeline.topic)
    batches = [batch for batch in history.batches if batch.batch_id in bounds]  # those the sink ran
    assert [batch.batch_id for batch in batches] == list(range(len(batches))) == sorted(bounds), sorted(bounds)
    kafka = read_partitions(pipeline.kafka.bootstrap, pipeline.topic, batches[-1].end)
    assert len(kafka) == 2 and all(kafka.values())

    progress: dict[int, int] = {}
    bound = NO_BOUND
    for batch in batches:
        for partition, end in batch.end.items():
            read = [t for offset in range(batch.start.get(partition, 0), end)
                    if offset in kafka[partition] and (t := event_time(kafka[partition][offset])) is not None]
            if read:
                progress[partition] = max(progress.get(partition, NO_BOUND), *read)
        if progress:
            bound = max(bound, min(progress.values()) - DELAY_MS)
        state = json.loads((checkpoint / "sparkwire" / "windows" / f"{batch.batch_id}.json").read_text())
        recorded = {int(partition): (int(time_ms), bool(idle)) for partition, time_ms, _, idle in state["partitions"]}
        assert recorded == {p: (t, False) for p, t in progress.items()}, (batch.batch_id, recorded, progress)
        assert bounds[batch.batch_id] == bound, (batch.batch_id, bounds[batch.batch_id], bound, progress)

    compared = [b for b in bounds if b + 1 in history.watermarks and history.watermarks[b + 1] > 0]
    assert len(compared) >= 5
    for b in compared:
        watermark = history.watermarks[b + 1]
        # The window of the latest event time Spark drops in batch b+1 ends at or below the sink's bound.
        assert watermark - watermark % WINDOW_MS + WINDOW_MS <= bounds[b], (b, watermark, bounds[b])
    for entry in entries:
        end = json.loads(entry.data)["windowEnd"]
        assert entry.batch_id == min(b for b, closed in bounds.items() if closed >= end), (end, entry.batch_id)


def test_bounded_run_with_duplicates_and_malformed_records_commits_exactly_the_expected_results(
    pipeline: Pipeline,
) -> None:
    pipeline.produce(EVENTS, duplicate_ratio=0.05, malformed_ratio=0.03, max_disorder_ms=200)
    expected = pipeline.expected()
    malformed, duplicates = produced(pipeline, "malformed"), produced(pipeline, "duplicate")
    assert len(expected) > 40 and malformed and duplicates

    run = pipeline.start()
    pipeline.wait_for_seq(len(expected))
    meta = pipeline.wait_until_idle()
    metrics = scrape_until(pipeline.metrics_port, "sparkwire_aggregator_malformed_records_total", len(malformed))
    run.stop(timeout=60)

    entries = list(pipeline.reader.iter_all())
    report = compare(expected, entries)
    assert report.ok, report.summary()
    assert (meta.first_seq, meta.last_seq) == (1, len(expected))
    assert meta.counters.get("duplicates_suppressed", 0) == 0  # Spark's own dedup left the sink nothing
    assert_closed_by_the_slowest_partition(pipeline, entries,
                                           metrics.get("sparkwire_aggregator_late_rows_dropped_total", 0.0))
    assert metrics.get("sparkwire_aggregator_window_rows_after_close_total") == 0
    # Bad input is counted, routed to the dead-letter topic, and changes no result.
    assert metrics["sparkwire_aggregator_malformed_records_total"] == len(malformed)
    assert metrics["sparkwire_aggregator_duplicate_events_dropped_total"] == len(duplicates)
    assert metrics["sparkwire_sink_records_committed_total"] == len(expected)
    assert metrics['sparkwire_job_kafka_offsets_behind{query="sparkwire-aggregate"}'] == 0  # all read
    dead = consume_all(pipeline.kafka.bootstrap, pipeline.dead_letter_topic, len(malformed))
    assert sorted(v.decode() for v in dead) == sorted(malformed)
    assert wait_exit(run, 5) == 0, "SIGTERM is a clean stop"


def test_without_a_dead_letter_topic_malformed_records_are_skipped_counted_and_change_no_result(
    pipeline: Pipeline,
) -> None:
    """``--dead-letter-topic ''``: one query reads and parses each record once; what is not an event is
    counted by that query's own observation, and the results are the same."""
    pipeline.dead_letters = False
    pipeline.produce(1_000, malformed_ratio=0.05, max_disorder_ms=200)
    expected, malformed = pipeline.expected(), produced(pipeline, "malformed")
    assert len(expected) > 10 and malformed

    run = pipeline.start()
    pipeline.wait_for_seq(len(expected))
    pipeline.wait_until_idle()
    metrics = scrape(pipeline.metrics_port)
    run.stop(timeout=60)

    report = compare(expected, list(pipeline.reader.iter_all()))
    assert report.ok, report.summary()
    assert metrics["sparkwire_aggregator_malformed_records_total"] == len(malformed)
    log = run.log_path.read_text()
    assert '"sparkwire-aggregate"' in log and '"sparkwire-deadletter"' not in log  # one query, by name
    assert consume_all(pipeline.kafka.bootstrap, pipeline.dead_letter_topic, 1, timeout=5) == []


def test_driver_killed_at_any_point_restarts_on_its_checkpoint_without_loss_or_duplicate(
    pipeline: Pipeline,
) -> None:
    pipeline.produce(EVENTS, duplicate_ratio=0.03, max_disorder_ms=200)
    expected = pipeline.expected()

    # Exact crash points inside the sink: each run SIGKILLs its whole driver (Python and JVM) there.
    for fault in ("before-commit@2", "mid-batch@4", "after-commit@6"):
        run = pipeline.start(fault)
        assert wait_exit(run, 180) == -9, f"{fault} did not fire:\n{run.log_tail(40)}"
        assert f"fault injected: SIGKILL at {fault.replace('@', ' of batch ')}" in run.log_tail(200)
        if fault == "mid-batch@4":
            assert_batch_staged_not_visible(pipeline, 4)

    # A kill from outside at a random moment while batches are flowing.
    run = pipeline.start()
    reached = pipeline.reader.meta().last_batch
    deadline = time.monotonic() + 120
    while pipeline.reader.meta().last_batch <= reached and time.monotonic() < deadline:
        time.sleep(0.2)
    time.sleep(random.uniform(0.0, 1.0))
    run.kill()

    final = pipeline.start()
    pipeline.wait_for_seq(len(expected))
    meta = pipeline.wait_until_idle()
    final.stop(timeout=60)

    report = compare(expected, list(pipeline.reader.iter_all()))
    assert report.ok, report.summary()
    assert meta.last_seq == len(expected)
    # The batch killed after its commit ran again on restart and wrote nothing: its chunks were replays.
    assert meta.counters["chunks_replayed"] >= 2


def test_a_batch_planned_on_a_stale_kafka_leaders_offsets_is_planned_again_on_restart(pipeline: Pipeline) -> None:
    """What a Kafka leader cut off from its controllers leaves (the chaos run's kafka-leader partition): a
    broker still answering as leader reported a high watermark below what the new leader had served, and
    Spark logged a batch whose end offset on a partition is below the previous batch's end. Spark refuses to
    run that plan ("offset was changed"), on every restart; the job drops the unrun plan and goes on."""
    pipeline.produce(EVENTS, duplicate_ratio=0.03, max_disorder_ms=200)
    expected = pipeline.expected()
    # Killed once batch 4 is planned and before it writes anything to the log: as a stale plan leaves it
    # (Spark refuses to run it, so it never reached the sink).
    run = pipeline.start("before-commit@4")
    assert wait_exit(run, 180) == -9, f"the fault did not fire:\n{run.log_tail(40)}"

    checkpoint = pipeline.workdir / "checkpoint" / "aggregate"
    planned = sorted(int(p.name) for p in (checkpoint / "offsets").iterdir() if p.name.isdigit())
    committed = {int(p.name) for p in (checkpoint / "commits").iterdir() if p.name.isdigit()}
    stale = planned[-1]
    assert (stale, stale - 1) == (4, max(committed)), (planned, committed)
    # Batch 4's plan replaced by a stale one: ending below where batch 3 ended on partition 0.
    header, source = (checkpoint / "offsets" / str(stale - 1)).read_text().splitlines()[1:3]
    ends = json.loads(source)
    assert ends[pipeline.topic]["0"] > 10, ends
    ends[pipeline.topic]["0"] -= 10
    (checkpoint / "offsets" / str(stale)).write_text(f"v1\n{header}\n{json.dumps(ends)}")

    restarted = pipeline.start()
    pipeline.wait_for_seq(len(expected))
    pipeline.wait_until_idle()
    restarted.stop(timeout=60)

    report = compare(expected, list(pipeline.reader.iter_all()))
    assert report.ok, report.summary()
    assert f"batch {stale} was planned on Kafka offsets below the batch before it" in restarted.log_tail(400)
