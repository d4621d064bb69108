"""Revenue per region over sliding windows, delivered exactly once in update mode: the page shows the open
windows moving as orders arrive, each revision once.

A team's own job, written only against the public API ``sparkwire.spark`` (docs/deliver-your-own-query.md).
Orders are JSON records on a Kafka topic::

    {"orderId": "o-17", "region": "eu-west", "amount": "19.90", "ts": 1764000000000}

``amount`` is a decimal (a string or a number), ``ts`` the order's event time in epoch milliseconds. A record
that is not such an order is dropped by ``parse_orders`` and counted by Spark's input metrics only; a team
that must keep them adds a dead-letter query as the built-in metrics job does.

Run it (settings from ``ORDERS_*`` environment variables, see :func:`job_from_environment`)::

    python -m sparkwire.examples.orders run        # deliver until stopped
    python -m sparkwire.examples.orders rebuild    # recompute a lost replay log from Kafka
"""

from __future__ import annotations

import os
from typing import Any

from pyspark.sql import functions as F
from pyspark.sql.types import DecimalType, LongType, StringType, StructField, StructType

from sparkwire.spark import Job, KafkaSource, SourceQuery, StreamSpec, Target, drop_duplicates

ORDER = StructType([
    StructField("orderId", StringType()),
    StructField("region", StringType()),
    StructField("amount", DecimalType(12, 2)),
    StructField("ts", LongType()),
])
MAX_TIMESTAMP_MS = 253_402_300_799_999  # what a Spark timestamp can hold


def parsed_order() -> Any:
    """A Kafka record's value as an ORDER struct (null fields where it is not one)."""
    return F.from_json(F.col("value").cast("string"), ORDER, {"mode": "PERMISSIVE"})


def valid_order() -> Any:
    """Whether the ``order`` column (:func:`parsed_order`) is an order: id, region, amount and a time Spark holds."""
    return (F.col("order.orderId").isNotNull() & (F.length("order.region") > 0) & F.col("order.amount").isNotNull()
            & F.col("order.ts").between(0, MAX_TIMESTAMP_MS))


def parse_orders(raw: Any) -> Any:
    """Kafka records -> one event per valid order, with its Kafka position (sparkwire's rebuild needs it)."""
    parsed = raw.select(parsed_order().alias("order"), "partition", "offset")
    return parsed.where(F.coalesce(valid_order(), F.lit(False))).select(
        F.timestamp_millis("order.ts").alias("eventTime"),
        F.col("order.orderId").alias("orderId"),
        F.col("order.region").alias("region"),
        F.col("order.amount").alias("amount"),
        "partition",
        "offset",
    )


def revenue_per_region(events: Any, window_ms: int = 10_000, slide_ms: int = 5_000) -> Any:
    """Orders (a repeated orderId counted once) per region in sliding windows: count, revenue, largest."""
    orders = drop_duplicates(events, ["orderId"])
    windows = orders.groupBy(
        F.window("eventTime", f"{window_ms} milliseconds", f"{slide_ms} milliseconds"), F.col("region")
    ).agg(F.count(F.lit(1)).alias("orders"), F.sum("amount").alias("revenue"), F.max("amount").alias("largestOrder"))
    return windows.select(
        F.col("window.start").alias("windowStart"),
        F.col("window.end").alias("windowEnd"),
        "region",
        "orders",
        "revenue",
        "largestOrder",
    )


def job(*, bootstrap_servers: str = "127.0.0.1:9092", topic: str = "orders", stream: str = "orders",
        redis_url: str = "redis://127.0.0.1:6379/0", checkpoint: str = ".run/checkpoints/orders",
        window_ms: int = 10_000, slide_ms: int = 5_000, watermark_delay_ms: int = 5_000, trigger_ms: int = 1_000,
        max_offsets_per_trigger: int = 0) -> Job:
    query = SourceQuery(
        source=KafkaSource(bootstrap_servers, topic, max_offsets_per_trigger=max_offsets_per_trigger),
        events=parse_orders,
        event_time="eventTime",
        watermark_delay_ms=watermark_delay_ms,
        query=lambda events: revenue_per_region(events, window_ms, slide_ms),
    )
    spec = StreamSpec(stream=stream, key="region", mode="update", id_from=("windowEnd", "region"),
                      event_time="windowEnd", window=("windowStart", "windowEnd"),
                      value_fields=("revenue", "orders", "largestOrder"), title="Revenue per region",
                      units={"revenue": "EUR", "largestOrder": "EUR"})
    return Job(query, spec, Target(redis_url=redis_url, checkpoint=checkpoint, trigger_ms=trigger_ms))


def job_from_environment() -> Job:
    """``ORDERS_BOOTSTRAP_SERVERS``, ``ORDERS_TOPIC``, ``ORDERS_STREAM``, ``ORDERS_REDIS_URL``,
    ``ORDERS_CHECKPOINT``, ``ORDERS_WINDOW_MS``, ``ORDERS_SLIDE_MS``, ``ORDERS_WATERMARK_DELAY_MS``,
    ``ORDERS_TRIGGER_MS``, ``ORDERS_MAX_OFFSETS_PER_TRIGGER``: each overrides :func:`job`'s argument."""
    texts = {"bootstrap_servers", "topic", "stream", "redis_url", "checkpoint"}
    numbers = {"window_ms", "slide_ms", "watermark_delay_ms", "trigger_ms", "max_offsets_per_trigger"}
    settings: dict[str, Any] = {}
    for name in texts | numbers:
        value = os.environ.get(f"ORDERS_{name.upper()}")
        if value is not None:
            settings[name] = int(value) if name in numbers else value
    return job(**settings)
