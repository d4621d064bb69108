"""Runs the real aggregator (PySpark driver + its JVM) against the session's Kafka and Redis."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from sparkwire.replaylog import ReplayLogReader, StreamMeta
from sparkwire.replaylog.redis_url import connect
from sparkwire_harness.stack import KafkaBroker, ManagedProcess, RedisServer, ReplicatedRedis, free_port
from sparkwire_harness.verify import (
    Outcome,
    ProducedLine,
    WindowResult,
    expected_outcome,
    expected_results,
    oracle_input,
    read_produced,
)

WINDOW_MS = 1_000
# Spark drops an event whose time is more than the delay behind the largest it read before the event's batch
# (one stateful operator: the batch's own watermark). Reading a backlog 300 records a batch, one partition's
# records can run a few hundred ms of event time ahead of the other's: the delay leaves the producer's 200 ms
# of disorder that much room, so the oracle's "on time" (within the delay of what was produced before it)
# is what Spark does.
DELAY_MS = 1_500
START_MS = 1_700_000_000_000


def wait_exit(process: ManagedProcess, timeout: float) -> int:
    deadline = time.monotonic() + timeout
    while process.alive:
        if time.monotonic() > deadline:
            raise AssertionError(f"{process.name} still running after {timeout}s:\n{process.log_tail()}")
        time.sleep(0.2)
    code = process.returncode
    assert code is not None
    return code


@dataclass
class Pipeline:
    """One topic, one stream and one checkpoint; the aggregator can be started on it again and again."""

    name: str
    workdir: Path
    kafka: KafkaBroker
    redis_server: RedisServer | ReplicatedRedis
    chunk_size: int = 2
    redis_replicas: int = 0
    max_offsets_per_trigger: int = 300
    runs: list[ManagedProcess] = field(default_factory=list)
    metrics_port: int = 0
    # False: the aggregator runs without a dead-letter topic (malformed records only counted).
    dead_letters: bool = True
    # The aggregator's Redis address when it differs from the readers' (a proxy with faults on the link).
    aggregator_redis_url: str | None = None
    # The event files of the parts produced so far, and the event time where the next part begins.
    parts: list[Path] = field(default_factory=list)
    next_start_ms: int = START_MS
    # The aggregator's --partition-skew-ms (0: its default, twice the delay). Larger, Spark's watermark keeps
    # events that the sink's closing rule drops as late (those its rebuild must drop too).
    partition_skew_ms: int = 0
    # The aggregator's --partition-idle-ms; None: its default (60 s of wall clock, which a slow machine can
    # reach while a test holds a partition silent on purpose).
    partition_idle_ms: int | None = None

    @property
    def topic(self) -> str:
        return f"{self.name}-raw"

    @property
    def dead_letter_topic(self) -> str:
        return f"{self.name}-dlq"

    @property
    def events_file(self) -> Path:
        """The first part's records (all records, where there is one part)."""
        return self.parts[0] if self.parts else self.workdir / "events.jsonl"

    @property
    def reader(self) -> ReplayLogReader:
        return ReplayLogReader(connect(self.redis_server.url), self.name)

    def produce(self, count: int, *flags: str, **options: float) -> None:
        """Produce ``count`` events as one more part of the run: a part starts where the event time of the one
        before it ended, with a seed of its own (event ids of its own). A test that produces a part after a
        fault knows the fault hit a run with results still to write, however fast the aggregator is."""
        part = len(self.parts)
        events_file = self.workdir / ("events.jsonl" if part == 0 else f"events-{part}.jsonl")
        settings = {"rate": 200.0, "start_ms": self.next_start_ms, "seed": 1 + part, **options}
        command = [
            sys.executable, "-m", "sparkwire.cli", "produce", "--bootstrap-servers", self.kafka.bootstrap,
            "--topic", self.topic, "--count", str(count), "--events-file", str(events_file), "--log-level", "WARNING",
        ]  # fmt: skip
        for name, value in settings.items():
            command += [f"--{name.replace('_', '-')}", str(value)]
        command += flags
        producer = ManagedProcess(f"produce-{part}-{len(self.runs)}", command, self.workdir)
        producer.start()
        assert wait_exit(producer, 120) == 0, producer.log_tail()
        self.parts.append(events_file)
        self.next_start_ms = int(settings["start_ms"]) + int(count * 1000 / settings["rate"])

    def produced(self) -> list[ProducedLine]:
        """Every record Kafka acknowledged, part after part, in produced order, with its partition."""
        return read_produced(self.parts)

    def expected(self) -> dict[str, WindowResult]:
        return expected_results(oracle_input(self.produced()), WINDOW_MS, DELAY_MS)

    def outcome(self, late_margin_ms: int) -> Outcome:
        return expected_outcome(oracle_input(self.produced()), WINDOW_MS, DELAY_MS, late_margin_ms=late_margin_ms)

    def start(self, fault: str | None = None) -> ManagedProcess:
        self.metrics_port = free_port()
        command = [
            sys.executable, "-m", "sparkwire.cli", "aggregate",
            "--bootstrap-servers", self.kafka.bootstrap, "--topic", self.topic,
            "--dead-letter-topic", self.dead_letter_topic if self.dead_letters else "",
            "--redis-url", self.aggregator_redis_url or self.redis_server.url,
            "--stream", self.name, "--checkpoint", str(self.workdir / "checkpoint"),
            "--window-ms", str(WINDOW_MS), "--watermark-delay-ms", str(DELAY_MS), "--trigger-ms", "300",
            "--max-offsets-per-trigger", str(self.max_offsets_per_trigger),
            "--chunk-size", str(self.chunk_size), "--metrics-port", str(self.metrics_port),
            "--redis-replicas", str(self.redis_replicas), "--partition-skew-ms", str(self.partition_skew_ms),
        ]  # fmt: skip
        if self.partition_idle_ms is not None:
            command += ["--partition-idle-ms", str(self.partition_idle_ms)]
        env = {"SPARKWIRE_FAULT": fault} if fault else {}
        process = ManagedProcess(f"aggregate-{len(self.runs)}", command, self.workdir, env=env)
        self.runs.append(process)
        process.start()
        return process

    def wait_for_seq(self, seq: int, timeout: float = 180) -> StreamMeta:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            meta = self.reader.meta()
            if meta.last_seq >= seq:
                return meta
            assert self.runs[-1].alive, f"aggregator exited:\n{self.runs[-1].log_tail(80)}"
            time.sleep(0.5)
        raise AssertionError(f"seq {seq} not reached; meta {self.reader.meta()}")

    def wait_until_idle(self, quiet_seconds: float = 4.0) -> StreamMeta:
        """Wait until no batch has been committed for ``quiet_seconds`` (many trigger intervals)."""
        last = self.reader.meta()
        quiet_since = time.monotonic()
        while time.monotonic() - quiet_since < quiet_seconds:
            time.sleep(0.5)
            meta = self.reader.meta()
            if (meta.last_batch, meta.last_seq) != (last.last_batch, last.last_seq):
                last, quiet_since = meta, time.monotonic()
        return last


@pytest.fixture
def pipeline(
    kafka_broker: KafkaBroker, redis_server: RedisServer, unique_name: str, tmp_path: Path,
    request: pytest.FixtureRequest,
) -> Iterator[Pipeline]:
    kafka_broker.create_topic(f"{unique_name}-raw", partitions=2)
    kafka_broker.create_topic(f"{unique_name}-dlq", partitions=1)
    pipe = Pipeline(unique_name, tmp_path, kafka_broker, redis_server)
    yield pipe
    for run in pipe.runs:
        if run.alive:
            run.stop(timeout=30)
    report = getattr(request.node, "rep_call", None)
    if report is not None and report.failed:
        for run in pipe.runs:
            print(f"--- {run.name} (exit {run.returncode}) ---\n{run.log_tail(60)}")
