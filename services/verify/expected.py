"""Expected window results computed in plain Python from the produced records, independently of Spark.

This is the oracle of the exactly-once tests: it shares no code with the aggregator, only the contract
(docs/replay-log.md): validity of a raw event, dedup by eventId, tumbling windows aligned to the epoch,
results emitted once the watermark (max event time - delay) has passed the window end.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class Event:
    timestamp: int
    metric: str
    value: float
    source_id: str
    event_id: str


@dataclass(frozen=True)
class WindowResult:
    metric: str
    window_start: int
    window_end: int
    count: int
    total: float
    minimum: float
    maximum: float

    @property
    def average(self) -> float:
        return self.total / self.count

    @property
    def processing_id(self) -> str:
        return processing_id(self.window_end, self.metric)


def processing_id(window_end_ms: int, metric: str) -> str:
    return hashlib.sha1(f"{window_end_ms}-{metric}".encode()).hexdigest()


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def parse_event(raw: str) -> Event | None:
    """The event in ``raw``, or None when it is not a valid event."""
    try:
        document = json.loads(raw)
    except ValueError:
        return None
    if not isinstance(document, dict):
        return None
    timestamp, metric, value = document.get("timestamp"), document.get("metricName"), document.get("value")
    source_id, event_id = document.get("sourceId"), document.get("eventId")
    if not (isinstance(timestamp, int) and not isinstance(timestamp, bool)):
        return None
    if not (isinstance(metric, str) and metric) or not _is_number(value):
        return None
    if not (isinstance(source_id, str) and isinstance(event_id, str)):
        return None
    assert isinstance(value, int | float)
    return Event(timestamp, metric, float(value), source_id, event_id)


def expected_results(raw_values: Iterable[str], window_ms: int, delay_ms: int) -> dict[str, WindowResult]:
    """Results by processingId for every window closed by the final watermark."""
    seen: set[str] = set()
    sums: dict[tuple[int, str], list[float]] = {}
    max_timestamp: int | None = None
    for raw in raw_values:
        event = parse_event(raw)
        if event is None or event.event_id in seen:
            continue
        seen.add(event.event_id)
        start = event.timestamp - event.timestamp % window_ms
        sums.setdefault((start, event.metric), []).append(event.value)
        max_timestamp = event.timestamp if max_timestamp is None else max(max_timestamp, event.timestamp)
    if max_timestamp is None:
        return {}
    watermark = max_timestamp - delay_ms
    results = {}
    for (start, metric), values in sums.items():
        if start + window_ms <= watermark:
            result = WindowResult(metric, start, start + window_ms, len(values), sum(values), min(values),
                                  max(values))
            results[result.processing_id] = result
    return results
