"""A query given with its source, so that sparkwire can run it again over past input (the rebuild).

A :class:`SourceQuery` is three things: the Kafka source, ``events`` (the stateless part: Kafka rows ->
events, one row per record at most, keeping Kafka's ``partition`` and ``offset`` columns) and ``query``
(events -> results, the stateful part). sparkwire puts the watermark between them, on ``event_time``. The
streaming query is ``query(events(kafka).withWatermark(event_time, delay))``; a rebuild reads the Kafka
range of past micro-batches as a batch DataFrame, drops the events Spark dropped as late (each record's
event time against the watermark of the batch that read it: the checkpoint has both), and runs ``query``
on the rest. So ``query`` must work on a batch DataFrame too: use :func:`drop_duplicates` rather than
``dropDuplicatesWithinWatermark``, which Spark refuses on batch DataFrames.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

KAFKA_POSITION = ("partition", "offset")
# Consumer settings sparkwire sets unless ``KafkaSource.options`` does. A partition leader cut off from the
# controllers keeps answering fetches (with nothing new) after another broker took over, so a consumer only
# learns of the new leader from fresh metadata: by default every 5 minutes, during which that partition
# stalls while the others advance the watermark, and its events then arrive late. 5 s bounds the stall
# (measured in the chaos run's kafka-leader faults, docs/reliability.md).
KAFKA_DEFAULTS = {"kafka.metadata.max.age.ms": "5000"}
LATE_WATERMARK_COLUMN = "__sparkwire_late_watermark_ms"


def drop_duplicates(events: Any, columns: list[str]) -> Any:
    """Repeats of ``columns`` dropped: within the watermark on a stream, all of them on a batch (a repeat
    that arrives after the stream's state for it expired is behind the watermark, so dropped as late)."""
    if events.isStreaming:
        return events.dropDuplicatesWithinWatermark(columns)
    return events.dropDuplicates(columns)


def _offsets(topic: str, offsets: dict[int, int]) -> str:
    return json.dumps({topic: {str(p): o for p, o in sorted(offsets.items())}})


@dataclass(frozen=True)
class KafkaSource:
    """A Kafka topic read by Spark's Kafka connector; ``options`` are passed to it as they are."""

    bootstrap_servers: str
    topic: str
    starting_offsets: str = "earliest"
    max_offsets_per_trigger: int = 0
    options: Mapping[str, str] = field(default_factory=dict)

    def read_stream(self, spark: Any) -> Any:
        reader = (
            spark.readStream.format("kafka")
            .option("kafka.bootstrap.servers", self.bootstrap_servers)
            .option("subscribe", self.topic)
            .option("startingOffsets", self.starting_offsets)
        )
        if self.max_offsets_per_trigger:
            reader = reader.option("maxOffsetsPerTrigger", str(self.max_offsets_per_trigger))
        for name, value in {**KAFKA_DEFAULTS, **self.options}.items():
            reader = reader.option(name, value)
        return reader.load()

    def read_range(self, spark: Any, starting: dict[int, int], ending: dict[int, int]) -> Any:
        """The records ``[starting[p], ending[p])`` of every partition, as a batch DataFrame."""
        reader = (
            spark.read.format("kafka")
            .option("kafka.bootstrap.servers", self.bootstrap_servers)
            .option("subscribe", self.topic)
            .option("startingOffsets", _offsets(self.topic, starting))
            .option("endingOffsets", _offsets(self.topic, ending))
            .option("failOnDataLoss", "true")  # retention deleting records under the job must fail it
        )
        for name, value in self.options.items():
            if not name.startswith(("startingOffsets", "maxOffsetsPerTrigger", "minOffsetsPerTrigger",
                                    "maxTriggerDelay")):  # a stream's pacing, not a batch's
                reader = reader.option(name, value)
        return reader.load()


@dataclass(frozen=True)
class SourceQuery:
    """A streaming query sparkwire can rebuild: see the module docstring."""

    source: KafkaSource
    events: Callable[[Any], Any]
    event_time: str
    watermark_delay_ms: int
    query: Callable[[Any], Any]

    def stream(self, spark: Any) -> Any:
        """The streaming result DataFrame."""
        events = self.events(self.source.read_stream(spark))
        return self.query(events.withWatermark(self.event_time, f"{self.watermark_delay_ms} milliseconds"))

    def rebuild_unavailable(self, spark: Any) -> str | None:
        """Why a rebuild could not be exact, or None: ``events`` must keep the Kafka position of each record."""
        columns = self.events(self.source.read_stream(spark)).columns
        missing = [name for name in (*KAFKA_POSITION, self.event_time) if name not in columns]
        if missing:
            return (f"events() dropped the column(s) {missing}: sparkwire needs each event's Kafka partition and "
                    "offset to know which micro-batch read it, and its event time to drop what that batch dropped "
                    "as late")
        return None

    def recompute(self, spark: Any, starting: dict[int, int], ending: dict[int, int],
                  late_watermarks: list[tuple[int, int, int, int]]) -> Any:
        """The results of the records in ``[starting, ending)`` as a batch DataFrame, without the events the
        stream dropped as late. ``late_watermarks``: (partition, start, end, late watermark ms) of every
        batch's range of every partition."""
        from pyspark.sql import functions as F

        ranges = spark.createDataFrame(
            late_watermarks, f"rangePartition INT, rangeStart LONG, rangeEnd LONG, {LATE_WATERMARK_COLUMN} LONG")
        events = self.events(self.source.read_range(spark, starting, ending))
        in_batch = events.join(
            F.broadcast(ranges),
            (events["partition"] == ranges["rangePartition"]) & (events["offset"] >= ranges["rangeStart"])
            & (events["offset"] < ranges["rangeEnd"]),
        )
        on_time = in_batch.where(F.unix_micros(F.col(self.event_time)) > F.col(LATE_WATERMARK_COLUMN) * 1000)
        return self.query(on_time.drop("rangePartition", "rangeStart", "rangeEnd", LATE_WATERMARK_COLUMN))
