"""Recompute the results of past micro-batches with one Spark batch job over their Kafka range.

The same ``pipeline.parse`` and ``pipeline.window_results`` as the streaming query, so processingIds and
values are the same by construction. Batch mode ignores watermarks, so Spark's streaming rule is applied
here from the checkpoint (``rebuild_plan.py``): every record belongs to the batch whose offset range
holds it, and a valid event is dropped as late when its event time is at or below the watermark that
batch filtered late rows with (the previous batch's); heartbeats only ever moved the watermark, which
the checkpoint already gives, so they are left out. Duplicates of an eventId are dropped as the stream
drops them within the watermark (a copy that arrives after its state expired is late as well). A
window is kept when the lost log held it (``RebuildPlan.keeps``) and committed as part of the batch that
emitted it (``RebuildPlan.emitting_batch``).
"""

from __future__ import annotations

import json
from typing import Any

from sparkwire.aggregator.rebuild_plan import RebuildPlan
from sparkwire.aggregator.sink import is_heartbeat_window, to_record
from sparkwire.replaylog import Record


def _offsets(topic: str, offsets: dict[int, int]) -> str:
    return json.dumps({topic: {str(p): o for p, o in sorted(offsets.items())}})


def recompute(spark: Any, bootstrap_servers: str, plan: RebuildPlan, window_ms: int,
              watermark_delay_ms: int) -> dict[int, list[Record]]:
    """The plan's results, by the batch id that emitted them (batches that emitted nothing are absent)."""
    from pyspark.sql import functions as F

    from sparkwire.aggregator import pipeline

    if not plan.batches:
        return {}
    first, last = plan.batches[0], plan.batches[-1]
    ending = {p: o for p, o in last.end.items()}
    starting = {p: first.start.get(p, ending[p]) for p in ending}
    raw = (
        spark.read.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap_servers)
        .option("subscribe", plan.topic)
        .option("startingOffsets", _offsets(plan.topic, starting))
        .option("endingOffsets", _offsets(plan.topic, ending))
        .option("failOnDataLoss", "true")  # retention deleting records under the job must fail it
        .load()
    )
    ranges = spark.createDataFrame(
        [(p, batch.start.get(p, end), end, batch.late_watermark_ms)
         for batch in plan.batches for p, end in batch.end.items() if end > batch.start.get(p, end)],
        "rangePartition INT, rangeStart LONG, rangeEnd LONG, lateWatermarkMs LONG",
    )
    parsed = pipeline.parse(raw)
    in_batch = parsed.join(
        F.broadcast(ranges),
        (parsed["partition"] == ranges["rangePartition"]) & (parsed["offset"] >= ranges["rangeStart"])
        & (parsed["offset"] < ranges["rangeEnd"]),
    )
    on_time = in_batch.where(F.col("valid") & (F.col("event.timestamp") > F.col("lateWatermarkMs")))
    results = pipeline.window_results(on_time, window_ms, watermark_delay_ms, streaming=False)
    by_batch: dict[int, list[Record]] = {}
    for row in results.collect():
        values = row.asDict()
        if is_heartbeat_window(values) or not plan.keeps(values["windowStart"], values["windowEnd"]):
            continue
        by_batch.setdefault(plan.emitting_batch(values["windowEnd"]), []).append(to_record(values))
    return by_batch
