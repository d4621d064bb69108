"""Recompute the results of past micro-batches with one Spark batch job over their Kafka range.

The user's own ``events`` and ``query`` (``source.SourceQuery``) run again, so processingIds and values are
the same by construction. Batch mode ignores watermarks, so Spark's streaming rule is applied from the
checkpoint (``plan.py``): every record belongs to the batch whose offset range holds it, and an
event is dropped as late when its event time is at or below that batch's late bound (``BatchInput.
late_watermark_ms``): the watermark it filtered late rows with (the previous batch's), and for a sink that
closes windows itself, at least what that sink had closed before the batch.

Which results go into the rebuilt log, and as part of which batch:

* append mode: a window the lost log held (``RebuildPlan.keeps``), committed with the batch that emitted it
  (``RebuildPlan.emitting_batch``), so results keep their order;
* update mode: the latest value of every result whose window no lost batch fed, as one batch ``upto - 1``
  (revision ``upto - 1``): the rebuilt log is a new epoch, where clients start from a snapshot, so the
  revisions before the latest are not needed, and every later batch's revision is newer.
"""

from __future__ import annotations

from typing import Any

from sparkwire.replaylog import Record
from sparkwire.spark.rebuild.plan import RebuildPlan
from sparkwire.spark.results.encoding import prepare
from sparkwire.spark.results.records import ResultEncoder
from sparkwire.spark.source import SourceQuery

WINDOW_START = "__sparkwire_window_start_ms"
WINDOW_END = "__sparkwire_window_end_ms"


def _millis(frame: Any, path: tuple[str, ...]) -> Any:
    """The window bound at ``path`` (a column, or a struct's field) of ``frame`` in epoch milliseconds."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    column = F.col(f"`{path[0]}`")
    data_type = frame.schema[path[0]].dataType
    for name in path[1:]:
        column, data_type = column[name], data_type[name].dataType
    if isinstance(data_type, (T.TimestampType, T.TimestampNTZType)):
        return F.unix_millis(column.cast("timestamp"))
    return column.cast("long")


def recompute(spark: Any, query: SourceQuery, encoder: ResultEncoder, plan: RebuildPlan) -> dict[int, list[Record]]:
    """The plan's results, by the batch id they are committed with (batches with nothing are absent)."""
    spec = encoder.spec
    if not plan.batches:
        return {}
    if spec.window_bounds is None:
        raise ValueError(f"stream {spec.stream}: the rebuild needs the result's window columns (StreamSpec.window)")
    first, last = plan.batches[0], plan.batches[-1]
    ending = dict(last.end)
    starting = {p: first.start.get(p, ending[p]) for p in ending}
    late = [(p, batch.start.get(p, end), end, batch.late_watermark_ms)
            for batch in plan.batches for p, end in batch.end.items() if end > batch.start.get(p, end)]
    results = query.recompute(spark, starting, ending, late)
    start_path, end_path = spec.window_bounds
    # Read from ``results`` itself: ``prepare`` turns its timestamps into microseconds, which a cast back to a
    # timestamp would take for seconds.
    windows = prepare(results.withColumn(WINDOW_START, _millis(results, start_path)).withColumn(
        WINDOW_END, _millis(results, end_path)))
    by_batch: dict[int, list[Any]] = {}
    for row in windows.collect():
        start, end = row[WINDOW_START], row[WINDOW_END]
        if spec.mode == "append":
            if start is None or end is None or not plan.keeps(start, end):
                continue
            by_batch.setdefault(plan.emitting_batch(end), []).append(row)
        elif plan.lost_before_ms is None or (start is not None and start > plan.lost_before_ms):
            by_batch.setdefault(plan.upto - 1, []).append(row)
    encoded = {batch_id: encoder.encode(rows, revision=batch_id).records for batch_id, rows in by_batch.items()}
    return {batch_id: records for batch_id, records in encoded.items() if records}
