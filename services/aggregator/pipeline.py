"""The streaming transformations: raw Kafka records -> valid events -> windowed results, and dead letters.

Only DataFrame building lives here; where the results go is ``sink.py``.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import DoubleType, LongType, StringType, StructField, StructType

EVENT_SCHEMA = StructType([
    StructField("timestamp", LongType()),
    StructField("metricName", StringType()),
    StructField("value", DoubleType()),
    StructField("sourceId", StringType()),
    StructField("eventId", StringType()),
])
# Epoch milliseconds that Spark timestamps can hold (years 1970..9999); outside it is a bad record, not a
# reason for the query to fail on an overflow.
MAX_TIMESTAMP_MS = 253_402_300_799_999
ERROR_HEADER = "sparkwire-error"


def _is_valid(event: Column) -> Column:
    checks = (
        event["timestamp"].between(0, MAX_TIMESTAMP_MS)
        & (F.length(event["metricName"]) > 0)
        & event["value"].isNotNull()
        & ~F.isnan(event["value"])
        & (F.abs(event["value"]) != F.lit(float("inf")))
        & event["sourceId"].isNotNull()
        & event["eventId"].isNotNull()
    )
    return F.coalesce(checks, F.lit(False))


def parse(raw: DataFrame) -> DataFrame:
    """Kafka rows -> ``raw`` text, parsed ``event`` struct and a ``valid`` flag. Never fails on bad input."""
    text = raw.select(F.col("value").cast("string").alias("raw"), "topic", "partition", "offset")
    parsed = text.withColumn("event", F.from_json("raw", EVENT_SCHEMA, {"mode": "PERMISSIVE"}))
    return parsed.withColumn("valid", _is_valid(F.col("event")))


def dead_letters(parsed: DataFrame) -> DataFrame:
    """Invalid records as Kafka sink rows: the original bytes, and where they came from in headers."""
    invalid = parsed.where(~F.col("valid"))
    headers = F.array(
        F.struct(F.lit(ERROR_HEADER).alias("key"), F.lit(b"invalid-event").alias("value")),
        F.struct(F.lit("source-topic").alias("key"), F.col("topic").cast("binary").alias("value")),
        F.struct(
            F.lit("source-position").alias("key"),
            F.concat_ws("/", F.col("partition"), F.col("offset")).cast("binary").alias("value"),
        ),
    )
    return invalid.select(F.col("raw").alias("value"), headers.alias("headers"))


def window_results(parsed: DataFrame, window_ms: int, watermark_delay_ms: int) -> DataFrame:
    """Valid events, deduplicated by eventId, aggregated per metric in tumbling event-time windows.

    Append mode emits each window once, when the watermark passes its end; ``processingId`` is
    sha1("<windowEnd ms>-<metricName>"), the same on every run for the same window.
    """
    events = parsed.where("valid").select(
        F.timestamp_millis(F.col("event.timestamp")).alias("eventTime"),
        F.col("event.metricName").alias("metricName"),
        F.col("event.value").alias("value"),
        F.col("event.eventId").alias("eventId"),
    )
    deduplicated = (
        events.withWatermark("eventTime", f"{watermark_delay_ms} milliseconds")
        .dropDuplicatesWithinWatermark(["eventId"])
    )
    windows = deduplicated.groupBy(
        F.window("eventTime", f"{window_ms} milliseconds"), F.col("metricName")
    ).agg(
        F.count(F.lit(1)).alias("count"),
        F.sum("value").alias("sum"),
        F.min("value").alias("min"),
        F.max("value").alias("max"),
        F.avg("value").alias("avg"),
    )
    window_end = F.unix_millis(F.col("window.end"))
    return windows.select(
        F.sha1(F.concat(window_end.cast("string"), F.lit("-"), F.col("metricName"))).alias("processingId"),
        F.col("metricName"),
        F.unix_millis(F.col("window.start")).alias("windowStart"),
        window_end.alias("windowEnd"),
        "count",
        "sum",
        "min",
        "max",
        "avg",
    )
