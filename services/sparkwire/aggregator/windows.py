"""Open windows and the bound below which they are closed: the metrics job's window state, kept by its sink.

Spark keeps one state for the metrics job, the eventId dedup (one stateful operator). Each micro-batch's
events are aggregated per window, metric and Kafka partition in that batch alone
(:func:`pipeline.batch_partials`); this module merges those partial aggregates into the open windows and
closes every window whose end is at or below ``closed_upto``: the slowest active partition's event-time
progress minus the watermark delay (``partition_progress.py`` states the rule, with idle partitions).

So a window is closed by the batch in which its last active partition passes its end + delay, with every
event of that partition read (Kafka orders a partition): a lagging partition holds it open instead of
having its events dropped as late. An event of a window closed before its batch is late: not merged, and
counted (``Advanced.late_events``). Spark's own watermark (the dedup's) is global, the newest event time of
all partitions minus the delay *plus* ``--partition-skew-ms`` (``job.py``), so Spark keeps the rows of a
partition up to that far behind the others and the bound here decides what is late.

Pure: no Spark, no files.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from sparkwire.aggregator.partition_progress import NO_BOUND, PartitionProgress, closing_bound, track_progress

__all__ = ["NO_BOUND", "Advanced", "Aggregate", "OpenWindows", "Partial", "partial_from_row", "processing_id"]


@dataclass
class Aggregate:
    """count, sum, min and max of one window of one metric; the average is derived."""

    count: int
    sum: float
    min: float
    max: float

    def merge(self, other: Aggregate) -> None:
        self.count += other.count
        self.sum += other.sum
        self.min = min(self.min, other.min)
        self.max = max(self.max, other.max)


@dataclass(frozen=True)
class Partial:
    """One row of a batch's partial aggregation: ``metric`` None for the heartbeats' group (which only
    moves event time), ``latest_ms`` the largest event time in the group, ``partition`` the Kafka partition
    its events came from."""

    window_end: int
    metric: str | None
    latest_ms: int
    aggregate: Aggregate | None
    partition: int = 0


@dataclass(frozen=True)
class Advanced:
    closed: list[dict[str, Any]]
    """The result rows of the windows the batch closed."""
    after_close: int
    """Partials of windows closed by an earlier batch (dropped)."""
    late_events: int = 0
    """The events in those partials: late events, dropped."""
    went_idle: list[int] = field(default_factory=list)
    """Partitions that became idle in this batch."""
    resumed: list[int] = field(default_factory=list)
    """Idle partitions that sent again in this batch."""


def processing_id(window_end_ms: int, metric: str) -> str:
    """sha1("<windowEnd ms>-<metricName>"): the same on every run for the same window."""
    return hashlib.sha1(f"{window_end_ms}-{metric}".encode()).hexdigest()


@dataclass
class OpenWindows:
    """The windows not yet closed, the bound at or below which windows are closed, and each Kafka
    partition's event-time progress."""

    window_ms: int
    delay_ms: int
    closed_upto: int = NO_BOUND
    open: dict[tuple[int, str], Aggregate] = field(default_factory=dict)
    partitions: dict[int, PartitionProgress] = field(default_factory=dict)

    def advance(self, partials: Iterable[Partial], *, now_ms: int = 0, idle_ms: int | None = None) -> Advanced:
        """Merge one batch's partial aggregates, read at wall-clock ``now_ms``; return the windows this batch
        closes, as result rows (``pipeline.WINDOW_SCHEMA``) in window-end and metric order, and the partials
        of windows closed before this batch (late: counted, not merged). ``idle_ms``: how long a partition
        may read nothing before it stops holding windows back (None: never)."""
        partials = list(partials)
        closed_before = self.closed_upto
        after_close = late_events = 0
        newest_read: dict[int, int] = {}
        for partial in partials:
            newest_read[partial.partition] = max(newest_read.get(partial.partition, NO_BOUND), partial.latest_ms)
        step = track_progress(self.partitions, newest_read, now_ms, idle_ms)
        self.partitions = step.progress
        self.closed_upto = closing_bound(self.partitions, self.delay_ms, closed_before)
        for partial in partials:
            if partial.metric is None or partial.aggregate is None:
                continue
            key = (partial.window_end, partial.metric)
            if key[0] <= closed_before:
                after_close += 1
                late_events += partial.aggregate.count
                continue
            known = self.open.get(key)
            if known is None:
                self.open[key] = Aggregate(**vars(partial.aggregate))
            else:
                known.merge(partial.aggregate)
        closing = sorted(key for key in self.open if key[0] <= self.closed_upto)
        rows = [self._result(end, metric, self.open.pop((end, metric))) for end, metric in closing]
        return Advanced(rows, after_close, late_events, step.went_idle, step.resumed)

    def _result(self, end: int, metric: str, aggregate: Aggregate) -> dict[str, Any]:
        return {
            "processingId": processing_id(end, metric), "metricName": metric, "windowStart": end - self.window_ms,
            "windowEnd": end, "count": aggregate.count, "sum": aggregate.sum, "min": aggregate.min,
            "max": aggregate.max, "avg": aggregate.sum / aggregate.count,
        }

    def to_document(self) -> dict[str, Any]:
        return {
            "windowMs": self.window_ms, "delayMs": self.delay_ms, "closedUpto": self.closed_upto,
            "open": [[end, metric, a.count, a.sum, a.min, a.max] for (end, metric), a in sorted(self.open.items())],
            "partitions": [[partition, p.event_time_ms, p.silent_since_ms, p.idle]
                           for partition, p in sorted(self.partitions.items())],
        }

    @classmethod
    def from_document(cls, document: Mapping[str, Any]) -> OpenWindows:
        """The state of :meth:`to_document`; a document from before per-partition progress (no
        ``partitions``) loads with none known: the next batch's partitions start it."""
        state = cls(int(document["windowMs"]), int(document["delayMs"]), int(document["closedUpto"]))
        for end, metric, count, total, low, high in document["open"]:
            state.open[(int(end), str(metric))] = Aggregate(int(count), float(total), float(low), float(high))
        for partition, event_time_ms, silent_since_ms, idle in document.get("partitions", []):
            state.partitions[int(partition)] = PartitionProgress(
                int(event_time_ms), None if silent_since_ms is None else int(silent_since_ms), bool(idle))
        return state


def partial_from_row(row: Mapping[str, Any]) -> Partial:
    """A collected row of ``pipeline.batch_partials`` as a :class:`Partial`."""
    metric = row["metricName"]
    aggregate = None
    if metric is not None:
        aggregate = Aggregate(int(row["count"]), float(row["sum"]), float(row["min"]), float(row["max"]))
        if not all(math.isfinite(v) for v in (aggregate.sum, aggregate.min, aggregate.max)):
            raise ValueError(f"window {row['windowEnd']} of {metric!r}: a non-finite aggregate {aggregate}")
    return Partial(int(row["windowEnd"]), metric, int(row["latestMs"]), aggregate, int(row.get("partition") or 0))
