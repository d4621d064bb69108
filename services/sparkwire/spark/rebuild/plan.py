"""Which part of a lost log can be recomputed exactly, from the checkpoint's batches and what Kafka still
holds. Pure: no Spark, no Kafka, no Redis (``rebuilder.py`` fetches the inputs and runs the plan).

The lost log held the results of batches ``0..upto-1``: every window whose end is at or below the
watermark of batch ``upto-1``. A batch can be recomputed when its offsets are known (its predecessor's
offsets file is still in the checkpoint) and Kafka still holds its whole range. Those form a suffix
``first..upto-1``; the batches before it are lost. Their rows all have event times at or below
``watermark(first) + delay`` (the watermark of ``first`` is the newest event time before it minus the
delay), so a window starting after that bound got none of them and is recomputed exactly; a window
starting at or before it may have missed rows and is not published at all — a partial rebuild never
publishes a wrong count, and the history before the bound is marked lost.

A query whose sink closes its windows itself (the metrics job: ``closed_upto`` given, each batch's bound
from its window state, and ``window_ms``, the length of its tumbling windows) differs in three ways:

* its one stateful operator filters a batch's late rows with that batch's own watermark;
* the sink drops, as late, a batch's events of a window already closed (end at or below the bound after
  the previous batch), however far Spark's watermark is behind: Spark keeps a lagging partition's rows
  (``--partition-skew-ms``) so that the sink decides. A recompute over the whole range would count them,
  so each batch's late bound is raised to below the first window still open before it
  (:func:`closed_late_bound`);
* a window is in the log once the bound after a batch reaches its end, so the lost log held the windows
  ending at or below the bound after batch ``upto-1``, each committed by the first batch whose bound
  reached its end.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from sparkwire.spark.rebuild.checkpoint import BatchInput, CheckpointError, QueryHistory


@dataclass(frozen=True)
class Shortfall:
    """Records of one partition the rebuild needed that Kafka no longer holds: ``[needed, earliest)``."""

    partition: int
    needed: int
    earliest: int
    records: int
    """Of ``[needed, earliest)``, the records inside the rebuild's range (the rest came after it)."""


@dataclass(frozen=True)
class RebuildPlan:
    query_id: str
    topic: str
    upto: int
    """Rebuild the results of the batches below this one."""
    batches: list[BatchInput]
    """The batches recomputed: ``first..upto-1``, contiguous; each one's ``late_watermark_ms`` is the event
    time at or below which the stream dropped its events as late."""
    emit_watermark_ms: int
    """Windows whose end is at or below this were in the lost log."""
    lost_before_ms: int | None
    """None when the whole history is rebuilt; otherwise windows starting at or before it are lost."""
    shortfalls: list[Shortfall] = field(default_factory=list)
    purged_before: int | None = None
    """The first batch whose input the checkpoint still knows, when Spark purged older offsets files."""
    closed_upto: Mapping[int, int] | None = None
    """For a sink that closes windows itself: the bound after each batch (None: Spark's append mode)."""
    window_ms: int | None = None
    """With ``closed_upto``: the length of the sink's tumbling windows."""

    @property
    def complete(self) -> bool:
        return self.lost_before_ms is None

    @property
    def lost_records(self) -> int:
        return sum(s.records for s in self.shortfalls)

    def keeps(self, window_start: int, window_end: int) -> bool:
        """Whether a recomputed window goes into the rebuilt log: the lost log held it, and no lost batch
        fed it."""
        if window_end > self.emit_watermark_ms:
            return False
        return self.lost_before_ms is None or window_start > self.lost_before_ms

    def emitting_batch(self, window_end: int) -> int:
        """The batch that emitted the window: the first whose (eviction) watermark reached its end, or whose
        bound did (a sink that closes windows itself)."""
        for batch in self.batches:
            reached = (batch.watermark_ms if self.closed_upto is None
                       else self.closed_upto.get(batch.batch_id, batch.watermark_ms))
            if reached >= window_end:
                return batch.batch_id
        raise ValueError(f"no batch below {self.upto} emitted a window ending at {window_end}")


def closed_late_bound(closed_upto: int, window_ms: int) -> int:
    """The event time (ms) at or below which an event's tumbling window (``[t - t mod w, t - t mod w + w)``,
    as the sink's and Spark's ``window()``) ends at or below ``closed_upto``: such an event is late.

    A window's end ``E`` is a multiple of ``w``, so ``E <= closed_upto`` iff ``E <= floor(closed_upto / w) *
    w`` iff the event's time is below that multiple. The late filter keeps event times *above* its bound,
    hence the multiple minus 1 ms: exact for event times in whole milliseconds (the metrics job's,
    ``timestamp_millis``)."""
    return (closed_upto // window_ms) * window_ms - 1


def _late_bounds(batches: list[BatchInput], closed_upto: Mapping[int, int], window_ms: int) -> list[BatchInput]:
    """``batches`` with their late bound as the closing sink drops: its own watermark (its one stateful
    operator's), raised to what the bound after the previous batch had closed."""
    bounded = []
    for batch in batches:
        late = batch.watermark_ms
        if batch.batch_id > 0:
            if batch.batch_id - 1 not in closed_upto:
                raise CheckpointError(f"no window state for batch {batch.batch_id - 1}: cannot tell which of "
                                      f"batch {batch.batch_id}'s events the sink dropped as late")
            # Before any event the bound is far below every watermark (nothing closed): max() keeps the latter.
            late = max(late, closed_late_bound(closed_upto[batch.batch_id - 1], window_ms))
        bounded.append(replace(batch, late_watermark_ms=late))
    return bounded


def _available(batch: BatchInput, earliest: dict[int, int]) -> bool:
    return all(batch.start.get(p, end) >= earliest.get(p, 0) for p, end in batch.end.items()
               if end > batch.start.get(p, end))


def plan_rebuild(history: QueryHistory, upto: int, earliest: dict[int, int], delay_ms: int,
                 closed_upto: Mapping[int, int] | None = None, window_ms: int | None = None) -> RebuildPlan:
    """Plan the rebuild of batches ``0..upto-1`` given ``earliest``, Kafka's first offset per partition;
    ``closed_upto`` and ``window_ms``: each batch's bound and the windows' length, for a sink that closes
    windows itself (module docstring)."""
    if closed_upto is not None and (window_ms is None or window_ms < 1):
        raise ValueError("a sink that closes its windows itself needs their length (window_ms) for the rebuild "
                         "to drop the events it dropped as late")
    known = history.upto(upto)
    emit_watermark = history.watermarks[upto - 1] if upto > 0 else 0
    if closed_upto is not None:
        if upto > 0 and upto - 1 not in closed_upto:
            raise CheckpointError(f"no window state for batch {upto - 1}: cannot tell which windows it had closed")
        emit_watermark = max(closed_upto[upto - 1], 0) if upto > 0 else 0
    first_index = len(known)
    while first_index > 0 and _available(known[first_index - 1], earliest):
        first_index -= 1
    batches = known[first_index:]
    if closed_upto is not None:
        assert window_ms is not None
        # Only the recomputed batches: a lost batch's bound is not needed (its windows are not published).
        batches = _late_bounds(batches, closed_upto, window_ms)
    first = batches[0].batch_id if batches else upto
    lost_before: int | None = None
    if first > 0:
        bound = history.watermarks[first] + delay_ms if first < upto else emit_watermark
        lost_before = min(bound, emit_watermark)
    shortfalls = []
    for partition, earliest_offset in sorted(earliest.items()):
        ranges = [(b.start[partition], b.end[partition]) for b in known
                  if b.end.get(partition, 0) > b.start.get(partition, b.end.get(partition, 0))]
        if ranges and ranges[0][0] < earliest_offset:
            needed, end = ranges[0][0], ranges[-1][1]
            shortfalls.append(Shortfall(partition, needed, earliest_offset, min(earliest_offset, end) - needed))
    purged = known[0].batch_id if known and known[0].batch_id > 0 else (upto if upto > 0 and not known else None)
    return RebuildPlan(history.query_id, history.topic, upto, batches, emit_watermark, lost_before, shortfalls,
                       purged, closed_upto, window_ms)
