"""Deterministic raw metric events, with optional injected duplicates, malformed records, late events and
heartbeats.

The generator is pure (no Kafka): a seed gives the same records every time, which is what lets a test
compute the expected window results from the produced records without running Spark.
"""

from __future__ import annotations

import json
import random
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal

RecordKind = Literal["event", "duplicate", "malformed", "late", "heartbeat"]

# Each one is malformed under every reading of the event schema (docs/replay-log.md, "Raw events"),
# so Spark and the independent checker agree that it is not an event.
MALFORMED_TEMPLATES: tuple[str, ...] = (
    "not json at all",
    '{"timestamp": 1, "metricName": "cpu"',  # truncated
    "[]",
    "{}",
    '{"timestamp": null, "metricName": "cpu", "value": 1.0, "sourceId": "s", "eventId": "e"}',
    '{"timestamp": "yesterday", "metricName": "cpu", "value": 1.0, "sourceId": "s", "eventId": "e"}',
    '{"timestamp": 1, "metricName": "cpu", "value": "high", "sourceId": "s", "eventId": "e"}',
    '{"timestamp": 1, "value": 1.0, "sourceId": "s", "eventId": "e"}',
    '{"timestamp": 1, "metricName": "cpu", "value": 1.0, "sourceId": "s"}',
    '{"timestamp": 1, "metricName": "", "value": 1.0, "sourceId": "s", "eventId": "e"}',
)


@dataclass(frozen=True)
class GeneratorConfig:
    seed: int = 1
    metrics: int = 4
    sources: int = 8
    # events per second of event time; event i happens at start_ms + i * 1000 / rate
    rate: float = 200.0
    start_ms: int = 1_700_000_000_000
    # events may be up to this much older than their position says (bounded out-of-orderness)
    max_disorder_ms: int = 0
    duplicate_ratio: float = 0.0
    malformed_ratio: float = 0.0
    # Late events: an extra event, this much older than the event it follows. Only once that much event
    # time has passed, and the lateness should be far beyond the watermark delay plus a couple of
    # micro-batches, so that Spark and the oracle agree that it is late (docs/replay-log.md).
    late_ratio: float = 0.0
    late_by_ms: int = 60_000
    # Heartbeats: every heartbeat_ms of event time, a record carrying the producer's event-time clock to
    # every partition, and for idle_ms after the last event, so a quiet stream's last window closes.
    heartbeat_ms: int = 0
    idle_ms: int = 0

    def __post_init__(self) -> None:
        if self.metrics < 1 or self.sources < 1:
            raise ValueError("metrics and sources must be >= 1")
        if self.rate <= 0:
            raise ValueError("rate must be > 0")
        if self.late_by_ms < 1 or self.heartbeat_ms < 0 or self.idle_ms < 0:
            raise ValueError("late_by_ms must be >= 1, heartbeat_ms and idle_ms >= 0")
        for name in ("duplicate_ratio", "malformed_ratio", "late_ratio"):
            if not 0.0 <= getattr(self, name) < 1.0:
                raise ValueError(f"{name} must be in [0, 1)")


@dataclass(frozen=True)
class ProducedRecord:
    kind: RecordKind
    value: str
    key: str
    # when the record should be sent, as an offset from the start of the run, in event time
    due_ms: int


def heartbeat(timestamp_ms: int) -> str:
    """A record that advances event time to ``timestamp_ms`` and is part of no result."""
    return json.dumps({"type": "heartbeat", "timestamp": timestamp_ms}, separators=(",", ":"))


def generate(config: GeneratorConfig, count: int) -> Iterator[ProducedRecord]:
    """``count`` events (not counting injected duplicates, malformed records, late events, heartbeats)."""
    rng = random.Random(config.seed)
    metric_names = [f"metric-{i}" for i in range(config.metrics)]
    source_ids = [f"source-{i}" for i in range(config.sources)]
    beats = _Heartbeats(config)

    def event(timestamp: int) -> tuple[str, str]:
        source = rng.choice(source_ids)
        document = {
            "timestamp": timestamp,
            "metricName": rng.choice(metric_names),
            "value": round(rng.uniform(0.0, 100.0), 3),
            "sourceId": source,
            "eventId": str(uuid.UUID(int=rng.getrandbits(128), version=4)),
        }
        return json.dumps(document, separators=(",", ":")), source

    due_ms = 0
    for i in range(count):
        due_ms = int(i * 1000 / config.rate)
        yield from beats.until(due_ms)
        disorder = rng.randint(0, config.max_disorder_ms) if config.max_disorder_ms else 0
        value, source = event(config.start_ms + due_ms - disorder)
        yield ProducedRecord("event", value, source, due_ms)
        if rng.random() < config.duplicate_ratio:
            yield ProducedRecord("duplicate", value, source, due_ms)
        if rng.random() < config.malformed_ratio:
            yield ProducedRecord("malformed", rng.choice(MALFORMED_TEMPLATES), "malformed", due_ms)
        # drawn only when asked for, so the other records of a seed stay what they were
        if config.late_ratio and rng.random() < config.late_ratio and due_ms >= config.late_by_ms:
            late_value, late_source = event(config.start_ms + due_ms - config.late_by_ms)
            yield ProducedRecord("late", late_value, late_source, due_ms)
    yield from beats.until(due_ms + config.idle_ms)


class _Heartbeats:
    """Heartbeats due every ``heartbeat_ms`` of event time, each stamped with its due time."""

    def __init__(self, config: GeneratorConfig) -> None:
        self.config = config
        self.next_due = 0

    def until(self, due_ms: int) -> Iterator[ProducedRecord]:
        step = self.config.heartbeat_ms
        while step and self.next_due <= due_ms:
            yield ProducedRecord("heartbeat", heartbeat(self.config.start_ms + self.next_due), "", self.next_due)
            self.next_due += step
