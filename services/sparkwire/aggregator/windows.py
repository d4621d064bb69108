"""Open windows and the bound below which they are closed: the metrics job's window state, kept by its sink.

Spark keeps one state for the metrics job, the eventId dedup (one stateful operator). Each micro-batch's
events are aggregated per window and metric in that batch alone (:func:`pipeline.batch_partials`); this
module merges those partial aggregates into the open windows and closes every window whose end is at or
below ``closed_upto``: the largest event time read so far (heartbeats included) minus the watermark delay.

Why a window closed here gets no later event: with one stateful operator Spark filters a batch's late rows
with that batch's own watermark (``spark.sql.streaming.statefulOperator.allowMultiple`` false), which is the
largest event time of the batches before it minus the delay, so at least ``closed_upto`` after this batch.
An event of a closed window is older than the window's end, so at or below that watermark: dropped as late.
(With two stateful operators Spark filters with the previous batch's watermark, and a window could still get
an event in the next batch: that is why the aggregation is not a Spark state.)

So a window is closed by the batch that reads the event passing its end + delay, instead of a batch later as
in Spark's append mode, with the same events in it. Pure: no Spark, no files.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

NO_BOUND = -(2**63)  # closed_upto before any event: nothing is closed


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
    moves event time), ``latest_ms`` the largest event time in the group."""

    window_end: int
    metric: str | None
    latest_ms: int
    aggregate: Aggregate | None


@dataclass(frozen=True)
class Advanced:
    closed: list[dict[str, Any]]
    """The result rows of the windows the batch closed."""
    after_close: int
    """Partials of windows closed by an earlier batch (dropped)."""


def processing_id(window_end_ms: int, metric: str) -> str:
    """sha1("<windowEnd ms>-<metricName>"): the same on every run for the same window."""
    return hashlib.sha1(f"{window_end_ms}-{metric}".encode()).hexdigest()


@dataclass
class OpenWindows:
    """The windows not yet closed, and the bound at or below which windows are closed."""

    window_ms: int
    delay_ms: int
    closed_upto: int = NO_BOUND
    open: dict[tuple[int, str], Aggregate] = field(default_factory=dict)

    def advance(self, partials: Iterable[Partial]) -> Advanced:
        """Merge one batch's partial aggregates; return the windows this batch closes, as result rows
        (``pipeline.WINDOW_SCHEMA``) in window-end and metric order, and the partials of windows closed
        before this batch (never expected: Spark drops their events as late; counted, not merged)."""
        partials = list(partials)
        closed_before = self.closed_upto
        after_close = 0
        for partial in partials:
            self.closed_upto = max(self.closed_upto, partial.latest_ms - self.delay_ms)
        for partial in partials:
            if partial.metric is None or partial.aggregate is None:
                continue
            key = (partial.window_end, partial.metric)
            if key[0] <= closed_before:
                after_close += 1
                continue
            known = self.open.get(key)
            if known is None:
                self.open[key] = Aggregate(**vars(partial.aggregate))
            else:
                known.merge(partial.aggregate)
        closing = sorted(key for key in self.open if key[0] <= self.closed_upto)
        rows = [self._result(end, metric, self.open.pop((end, metric))) for end, metric in closing]
        return Advanced(rows, after_close)

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
        }

    @classmethod
    def from_document(cls, document: Mapping[str, Any]) -> OpenWindows:
        state = cls(int(document["windowMs"]), int(document["delayMs"]), int(document["closedUpto"]))
        for end, metric, count, total, low, high in document["open"]:
            state.open[(int(end), str(metric))] = Aggregate(int(count), float(total), float(low), float(high))
        return state


def partial_from_row(row: Mapping[str, Any]) -> Partial:
    """A collected row of ``pipeline.batch_partials`` as a :class:`Partial`."""
    metric = row["metricName"]
    aggregate = None
    if metric is not None:
        aggregate = Aggregate(int(row["count"]), float(row["sum"]), float(row["min"]), float(row["max"]))
        if not all(math.isfinite(v) for v in (aggregate.sum, aggregate.min, aggregate.max)):
            raise ValueError(f"window {row['windowEnd']} of {metric!r}: a non-finite aggregate {aggregate}")
    return Partial(int(row["windowEnd"]), metric, int(row["latestMs"]), aggregate)
