"""The metrics query: raw Kafka records -> valid events -> windowed results, and dead letters.

Only DataFrame building lives here. The live stream is ``deduplicated(events)``, Spark's one stateful
operator, and each micro-batch of it goes through ``batch_partials`` in the sink, which closes the windows
(``closing_sink.py``); ``window_results`` is the same aggregation as one query, which the rebuild runs over
past input.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import DoubleType, LongType, StringType, StructField, StructType

from sparkwire.spark import DEADLETTER_OBSERVATION, drop_duplicates

EVENT_SCHEMA = StructType([
    StructField("type", StringType()),
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
HEARTBEAT = "heartbeat"
EVENT_TIME = "eventTime"
# The schema of window_results (a Spark test holds them together).
WINDOW_SCHEMA = StructType([
    StructField("processingId", StringType()),
    StructField("metricName", StringType()),
    StructField("windowStart", LongType()),
    StructField("windowEnd", LongType()),
    StructField("count", LongType(), nullable=False),
    StructField("sum", DoubleType()),
    StructField("min", DoubleType()),
    StructField("max", DoubleType()),
    StructField("avg", DoubleType()),
])


def _valid_time(event: Column) -> Column:
    return event["timestamp"].between(0, MAX_TIMESTAMP_MS)


def _is_heartbeat(event: Column) -> Column:
    return F.coalesce((event["type"] == F.lit(HEARTBEAT)) & _valid_time(event), F.lit(False))


def _is_valid(event: Column) -> Column:
    checks = (
        _valid_time(event)
        & ~F.coalesce(event["type"] == F.lit(HEARTBEAT), F.lit(False))
        & (F.length(event["metricName"]) > 0)
        & event["value"].isNotNull()
        & ~F.isnan(event["value"])
        & (F.abs(event["value"]) != F.lit(float("inf")))
        & event["sourceId"].isNotNull()
        & event["eventId"].isNotNull()
    )
    return F.coalesce(checks, F.lit(False))


def parse(raw: DataFrame) -> DataFrame:
    """Kafka rows -> ``raw`` text, parsed ``event`` struct, a ``valid`` event flag and a ``heartbeat`` flag
    (a record that only moves event time). Never fails on bad input."""
    text = raw.select(F.col("value").cast("string").alias("raw"), "topic", "partition", "offset")
    parsed = text.withColumn("event", F.from_json("raw", EVENT_SCHEMA, {"mode": "PERMISSIVE"}))
    return parsed.withColumn("valid", _is_valid(F.col("event"))).withColumn(
        "heartbeat", _is_heartbeat(F.col("event"))
    )


def dead_letters(parsed: DataFrame) -> DataFrame:
    """Records that are neither events nor heartbeats as Kafka sink rows: the original bytes, and where they
    came from in headers."""
    invalid = parsed.where(~F.col("valid") & ~F.col("heartbeat"))
    headers = F.array(
        F.struct(F.lit(ERROR_HEADER).alias("key"), F.lit(b"invalid-event").alias("value")),
        F.struct(F.lit("source-topic").alias("key"), F.col("topic").cast("binary").alias("value")),
        F.struct(
            F.lit("source-position").alias("key"),
            F.concat_ws("/", F.col("partition"), F.col("offset")).cast("binary").alias("value"),
        ),
    )
    return invalid.select(F.col("raw").alias("value"), headers.alias("headers"))


def events(raw: DataFrame, count_malformed: bool = False) -> DataFrame:
    """Kafka rows -> the metrics query's events (``SourceQuery.events``): valid events and heartbeats, with
    their Kafka position. A heartbeat has no metricName and a unique eventId (its Kafka position).

    ``count_malformed``: observe how many records are neither (as the dead-letter query does when it runs;
    with none, the skipped records are at least counted)."""
    parsed = parse(raw)
    if count_malformed:
        parsed = parsed.observe(DEADLETTER_OBSERVATION,
                                F.count_if(~F.col("valid") & ~F.col("heartbeat")).alias("malformed"))
    kafka_position = F.concat_ws("/", F.lit(HEARTBEAT), F.col("partition"), F.col("offset"))
    return parsed.where("valid OR heartbeat").select(
        F.timestamp_millis(F.col("event.timestamp")).alias(EVENT_TIME),
        F.when(F.col("valid"), F.col("event.metricName")).alias("metricName"),
        F.when(F.col("valid"), F.col("event.value")).alias("value"),
        F.when(F.col("valid"), F.col("event.eventId")).otherwise(kafka_position).alias("eventId"),
        "partition",
        "offset",
    )


def deduplicated(events: DataFrame) -> DataFrame:
    """Events without repeats of an eventId: the metrics job's one stateful operator on a stream (rows
    behind the watermark are dropped, and counted, here)."""
    result: DataFrame = drop_duplicates(events, ["eventId"])
    return result


def batch_partials(events: DataFrame, window_ms: int) -> DataFrame:
    """One micro-batch's deduplicated events aggregated per tumbling window, metric and Kafka partition,
    that batch alone (``windows.partial_from_row`` reads the rows): the sink merges them into the open
    windows. Heartbeats fall into the null-metric group, whose ``latestMs`` moves event time. Per partition,
    because the sink tracks each partition's event-time progress (``partition_progress.py``). The window
    is Spark's ``window()``'s for event times from 1970 on: ``[t - t mod w, t - t mod w + w)``."""
    millis = F.unix_millis(F.col(EVENT_TIME))
    return events.groupBy(
        (millis - F.pmod(millis, F.lit(window_ms)) + F.lit(window_ms)).alias("windowEnd"), F.col("metricName"),
        F.col("partition"),
    ).agg(
        F.count(F.lit(1)).alias("count"),
        F.sum("value").alias("sum"),
        F.min("value").alias("min"),
        F.max("value").alias("max"),
        F.max(millis).alias("latestMs"),
    )


def window_results(events: DataFrame, window_ms: int) -> DataFrame:
    """Events (watermarked on ``eventTime`` by sparkwire), deduplicated by eventId, aggregated per metric in
    tumbling event-time windows (``SourceQuery.query``: the rebuild runs it over past input, and its schema
    is the results'; ``windows.OpenWindows`` computes the same results from ``batch_partials``).

    ``processingId`` is sha1("<windowEnd ms>-<metricName>"), the same on every run for the same window.

    Heartbeats go all the way through, so that they move the watermark (a filter that does not use the
    event time would be pushed below ``withWatermark`` by the optimizer, and they would not): each falls
    into a window's null-metric group, a row with a null key, which the sink does not deliver.
    """
    windows = deduplicated(events).groupBy(
        F.window(EVENT_TIME, f"{window_ms} milliseconds"), F.col("metricName")
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
