"""Deterministic raw metric events, with optional injected duplicates and malformed records.

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

RecordKind = Literal["event", "duplicate", "malformed"]

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

    def __post_init__(self) -> None:
        if self.metrics < 1 or self.sources < 1:
            raise ValueError("metrics and sources must be >= 1")
        if self.rate <= 0:
            raise ValueError("rate must be > 0")
        for name in ("duplicate_ratio", "malformed_ratio"):
            if not 0.0 <= getattr(self, name) < 1.0:
                raise ValueError(f"{name} must be in [0, 1)")


@dataclass(frozen=True)
class ProducedRecord:
    kind: RecordKind
    value: str
    key: str
    # when the record should be sent, as an offset from the start of the run, in event time
    due_ms: int


def generate(config: GeneratorConfig, count: int) -> Iterator[ProducedRecord]:
    """``count`` events (not counting injected duplicates and malformed records)."""
    rng = random.Random(config.seed)
    metric_names = [f"metric-{i}" for i in range(config.metrics)]
    source_ids = [f"source-{i}" for i in range(config.sources)]
    for i in range(count):
        due_ms = int(i * 1000 / config.rate)
        disorder = rng.randint(0, config.max_disorder_ms) if config.max_disorder_ms else 0
        source = rng.choice(source_ids)
        event = {
            "timestamp": config.start_ms + due_ms - disorder,
            "metricName": rng.choice(metric_names),
            "value": round(rng.uniform(0.0, 100.0), 3),
            "sourceId": source,
            "eventId": str(uuid.UUID(int=rng.getrandbits(128), version=4)),
        }
        value = json.dumps(event, separators=(",", ":"))
        yield ProducedRecord("event", value, source, due_ms)
        if rng.random() < config.duplicate_ratio:
            yield ProducedRecord("duplicate", value, source, due_ms)
        if rng.random() < config.malformed_ratio:
            yield ProducedRecord("malformed", rng.choice(MALFORMED_TEMPLATES), "malformed", due_ms)
