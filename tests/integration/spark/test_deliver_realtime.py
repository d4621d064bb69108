"""``deliver(mode="realtime")`` on a real SparkSession, Kafka broker and Redis: what it refuses before anything
is written, and rows committed once each, in gap-free seqs, when Spark sends the same offsets again."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
import redis as redis_lib
from confluent_kafka import Producer
from pyspark.sql import functions as F

from sparkwire.replaylog import ReplayLogReader
from sparkwire.spark import DeliveryError, KafkaSource, SourceQuery, Target, deliver
from sparkwire_harness.stack import KafkaBroker, RedisServer

pytestmark = pytest.mark.slow


def kafka(spark: Any, broker: KafkaBroker, topic: str) -> Any:
    return (spark.readStream.format("kafka").option("kafka.bootstrap.servers", broker.bootstrap)
            .option("subscribe", topic).option("startingOffsets", "earliest").load())


def large_orders(raw: Any) -> Any:
    """A live feed: orders over 100, one row per item (an explode), with their Kafka position."""
    order = F.from_json(F.col("value").cast("string"), "orderId string, amount int, items array<string>")
    parsed = raw.select(order.alias("o"), "topic", "partition", "offset")
    return parsed.where(F.col("o.amount") > 100).select(
        "o.orderId", "o.amount", F.posexplode("o.items").alias("pos", "item"), "topic", "partition", "offset")


def produce(broker: KafkaBroker, topic: str, orders: list[dict[str, Any]]) -> None:
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for order in orders:
        producer.produce(topic, key=order["orderId"], value=json.dumps(order))
    producer.flush(10)


REFUSALS = [
    ("a stateful aggregation", lambda frame: frame.groupBy("item").count(), {}, "stateful operator"),
    ("dropDuplicates", lambda frame: frame.dropDuplicates(["orderId"]), {}, "dropDuplicates"),
    ("no Kafka position", lambda frame: frame.drop("offset"), {}, "no column 'offset'"),
    ("an id_from", lambda frame: frame, {"id_from": ("orderId",)}, "Kafka position"),
    ("a topic read twice", lambda frame: frame.unionByName(frame), {"row_index": "pos"}, "in two sources"),
    ("an explode without row_index", lambda frame: frame, {"row_index": None}, "row_index="),
    ("a row_index not an integer", lambda frame: frame, {"row_index": "item"}, "must be an integer column"),
    ("a random row_index", lambda frame: frame.withColumn("pos", (F.rand() * 10).cast("int")), {},
     "non-deterministic"),
    ("an offset made up", lambda frame: frame.withColumn("offset", F.monotonically_increasing_id()), {},
     "non-deterministic"),
]


@pytest.mark.parametrize(("case", "build", "options", "message"), REFUSALS, ids=[r[0] for r in REFUSALS])
def test_realtime_refuses_before_anything_is_written(
    spark: Any, kafka_broker: KafkaBroker, redis_server: RedisServer, redis: redis_lib.Redis, tmp_path: Path,
    unique_name: str, case: str, build: Any, options: dict[str, Any], message: str,
) -> None:
    frame = build(large_orders(kafka(spark, kafka_broker, unique_name)))
    target = Target(redis_url=redis_server.url, checkpoint=str(tmp_path / "checkpoint"))
    with pytest.raises(DeliveryError, match=message):
        deliver(frame, stream=unique_name, key="orderId", mode="realtime", target=target,
                **{"row_index": "pos", **options})
    assert redis.keys(f"*{{{unique_name}}}*") == []
    assert not (tmp_path / "checkpoint").exists()


def test_realtime_refuses_a_batch_dataframe_and_a_source_query(spark: Any, redis_server: RedisServer) -> None:
    with pytest.raises(DeliveryError, match="batch DataFrame"):
        deliver(spark.range(3).withColumn("k", F.lit("a")), stream="s", key="k", mode="realtime",
                target=Target(redis_url=redis_server.url))
    query = SourceQuery(source=KafkaSource("127.0.0.1:1", "t"), events=lambda df: df, event_time="timestamp",
                        watermark_delay_ms=1000, query=lambda df: df)
    with pytest.raises(DeliveryError, match="streaming DataFrame itself"):
        deliver(query, spark=spark, stream="s", key="k", mode="realtime", target=Target(redis_url=redis_server.url))


def wait_for(reader: ReplayLogReader, seq: int, query: Any, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while reader.meta().last_seq < seq and time.monotonic() < deadline:
        if query.exception() is not None:
            raise AssertionError(f"the query failed: {query.exception()}")
        time.sleep(0.2)
    assert reader.meta().last_seq >= seq, f"last_seq {reader.meta().last_seq}, waited for {seq}"


def test_rows_committed_once_when_the_same_offsets_are_sent_again(
    spark: Any, kafka_broker: KafkaBroker, redis_server: RedisServer, redis: redis_lib.Redis, tmp_path: Path,
    unique_name: str,
) -> None:
    """Every row of the feed once, in gap-free seqs; then a query on a new checkpoint reads the same offsets
    from the start (what Spark does, from its last committed offsets, after a failure): none is committed
    again, and the rows after them are."""
    kafka_broker.create_topic(unique_name, partitions=2)
    orders = [{"orderId": f"o{n}", "amount": 50 + 20 * n, "items": ["a", "b"]} for n in range(8)]  # o3..o7 > 100
    produce(kafka_broker, unique_name, orders)
    reader = ReplayLogReader(redis, unique_name)

    def run(checkpoint: str) -> Any:
        return deliver(large_orders(kafka(spark, kafka_broker, unique_name)), stream=unique_name, key="orderId",
                       mode="realtime", event_time=None, title="Large orders", row_index="pos",
                       target=Target(redis_url=redis_server.url, checkpoint=str(tmp_path / checkpoint),
                                     realtime_batch="5 seconds"))

    first = run("first")
    try:
        wait_for(reader, 10, first)  # 5 large orders x 2 items
    finally:
        first.stop()
    entries = list(reader.iter_all())
    assert [entry.seq for entry in entries] == list(range(1, 11))
    rows = sorted((json.loads(entry.data)["orderId"], json.loads(entry.data)["item"]) for entry in entries)
    assert rows == [(f"o{n}", item) for n in range(3, 8) for item in "ab"]
    assert len({entry.processing_id for entry in entries}) == 10  # an item's id: its position and index
    descriptor = json.loads(reader.descriptor() or "{}")
    assert descriptor["realtime"] is True and descriptor["key"] == ["orderId"]

    again = run("second")  # the same offsets, sent again
    try:
        produce(kafka_broker, unique_name, [{"orderId": "o-new", "amount": 500, "items": ["c"]}])
        wait_for(reader, 11, again)
        time.sleep(1.0)  # what else would come in is there by now
    finally:
        again.stop()
    meta = reader.meta()
    assert meta.last_seq == 11 and meta.counters["duplicates_suppressed"] == 10
    assert [entry.seq for entry in reader.iter_all()] == list(range(1, 12))
    assert json.loads(next(reader.iter_all()).data).keys() >= {"orderId", "item", "topic", "partition", "offset",
                                                                "processingId"}
