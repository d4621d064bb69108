"""``sparkwire.spark``: deliver any PySpark Structured Streaming query exactly once to browsers.

The public API (docs/deliver-your-own-query.md); every other module of this package is internal::

    from sparkwire.spark import KafkaSource, SourceQuery, Target, deliver, drop_duplicates

    query = SourceQuery(source=KafkaSource("kafka:9092", "orders"), events=parse_orders,
                        event_time="eventTime", watermark_delay_ms=5_000, query=revenue_per_region)
    deliver(query, stream="orders", key="region", mode="update", id_from=("windowEnd", "region"),
            event_time="windowEnd", window=("windowStart", "windowEnd"), spark=spark)
"""

from __future__ import annotations

from sparkwire.spark.delivery import Job, Target, deliver, deliver_job, foreach_batch
from sparkwire.spark.encoding import UnencodableSchema
from sparkwire.spark.main import main
from sparkwire.spark.sink import ReplayLogSink
from sparkwire.spark.source import KafkaSource, SourceQuery, drop_duplicates
from sparkwire.spark.stream import DeliveryError, StreamSpec

__all__ = [
    "DeliveryError",
    "Job",
    "KafkaSource",
    "ReplayLogSink",
    "SourceQuery",
    "StreamSpec",
    "Target",
    "UnencodableSchema",
    "deliver",
    "deliver_job",
    "drop_duplicates",
    "foreach_batch",
    "main",
]
