"""Expected window results computed in plain Python from the produced records, independently of Spark.

This is the oracle of the exactly-once tests: it shares no code with the aggregator, only the contract
(docs/replay-log.md): validity of a raw event, heartbeats (they move event time and count in no window),
late events dropped (``lateness.py``), dedup by eventId, tumbling windows aligned to the epoch, a window
emitted once every partition's event time has passed its end + delay.

Records are the produced values in produced order, each a string (partition unknown: all are taken as one
partition's) or a ``(partition, value)`` pair when the caller chose the partitions; a heartbeat in a pair
moves only that partition (the producer sends one to each).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass, field

from sparkwire_harness.verify.lateness import UNKNOWN_PARTITION, LatenessModel

Produced = str | tuple[int, str]
"""A produced record's value, or (partition, value)."""

MAX_TIMESTAMP_MS = 253_402_300_799_999


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


def _document(raw: str) -> dict[str, object] | None:
    try:
        document = json.loads(raw)
    except ValueError:
        return None
    return document if isinstance(document, dict) else None


def parse_heartbeat(raw: str) -> int | None:
    """The event time a heartbeat record moves the stream to, or None when ``raw`` is not a heartbeat."""
    document = _document(raw)
    if document is None or document.get("type") != "heartbeat":
        return None
    timestamp = document.get("timestamp")
    if isinstance(timestamp, int) and not isinstance(timestamp, bool) and 0 <= timestamp <= MAX_TIMESTAMP_MS:
        return timestamp
    return None


def parse_event(raw: str) -> Event | None:
    """The event in ``raw``, or None when it is not a valid event (a heartbeat is not an event)."""
    document = _document(raw)
    if document is None or document.get("type") == "heartbeat":
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


@dataclass
class Outcome:
    """What the oracle expects: results by processingId, and the events dropped as late."""

    results: dict[str, WindowResult] = field(default_factory=dict)
    late_events: list[str] = field(default_factory=list)


def expected_outcome(
    raw_values: Iterable[Produced], window_ms: int, delay_ms: int, *, late_margin_ms: int | None = None
) -> Outcome:
    """Results for every window closed once every partition is read to its end, and the events dropped as
    late, from the records in produced order; ``late_margin_ms``: see ``lateness.py`` (None: no event may
    be late)."""
    outcome = Outcome()
    seen: set[str] = set()
    sums: dict[tuple[int, str], list[float]] = {}
    lateness = LatenessModel(delay_ms, late_margin_ms, window_ms)
    for produced in raw_values:
        partition, raw = (UNKNOWN_PARTITION, produced) if isinstance(produced, str) else produced
        beat = parse_heartbeat(raw)
        if beat is not None:
            lateness.advance(beat, partition)
            continue
        event = parse_event(raw)
        if event is None:
            continue
        if lateness.is_late(event.timestamp, partition):
            outcome.late_events.append(event.event_id)
            continue
        lateness.advance(event.timestamp, partition)
        if event.event_id in seen:
            continue
        seen.add(event.event_id)
        start = event.timestamp - event.timestamp % window_ms
        sums.setdefault((start, event.metric), []).append(event.value)
    closed_upto = lateness.closed_upto()
    if closed_upto is None:
        return outcome
    for (start, metric), values in sums.items():
        if start + window_ms <= closed_upto:
            result = WindowResult(metric, start, start + window_ms, len(values), sum(values), min(values),
                                  max(values))
            outcome.results[result.processing_id] = result
    return outcome


def expected_results(
    raw_values: Iterable[Produced], window_ms: int, delay_ms: int, *, late_margin_ms: int | None = None
) -> dict[str, WindowResult]:
    """Results by processingId for every window closed once every partition is read to its end."""
    return expected_outcome(raw_values, window_ms, delay_ms, late_margin_ms=late_margin_ms).results
