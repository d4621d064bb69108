"""A team's own query on real Kafka, Spark and Redis (the session's fixtures): a grouping by nullable columns
delivers every group, null ones included (issue 38: 14 % of a page-view query's keys vanished); Spark's window
struct column, given as ``window="window"``, gets the rebuild of a lost log. The expected results are
computed in plain Python from the events produced; no Spark."""

from __future__ import annotations

import datetime as dt
import json
import logging
import random
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import redis as redis_lib
from confluent_kafka import Producer
from prometheus_client import REGISTRY
from pyspark.sql import functions as F
from pyspark.sql import types as T

from sparkwire.replaylog import ReplayLogReader
from sparkwire.spark import KafkaSource, SourceQuery, Target, deliver
from sparkwire.spark.results.records import derive_id
from sparkwire_harness.stack import KafkaBroker, RedisServer

pytestmark = pytest.mark.slow

START_MS = 1_764_000_000_000
WINDOW_MS, DELAY_MS = 2_000, 1_000
EVENT = T.StructType([T.StructField("id", T.StringType()), T.StructField("country", T.StringType()),
                      T.StructField("os", T.StringType()), T.StructField("ts", T.LongType())])


def stamp(millis: int) -> str:
    """A timestamp as sparkwire encodes it."""
    return dt.datetime.fromtimestamp(millis / 1000, dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%f") + "Z"


def produce(bootstrap: str, topic: str, events: list[dict[str, Any]]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for event in events:
        producer.produce(topic, key=event["id"].encode(), value=json.dumps(event).encode())
        producer.poll(0)
    assert producer.flush(30) == 0


def parse(raw: Any) -> Any:
    event = F.from_json(F.col("value").cast("string"), EVENT)
    parsed = raw.select(event.alias("e"), "partition", "offset")
    return parsed.where(F.col("e.id").isNotNull()).select(
        F.timestamp_millis("e.ts").alias("eventTime"), "e.id", "e.country", "e.os", "partition", "offset")


def source_query(bootstrap: str, topic: str, query: Callable[[Any], Any]) -> SourceQuery:
    return SourceQuery(source=KafkaSource(bootstrap, topic), events=parse, event_time="eventTime",
                       watermark_delay_ms=DELAY_MS, query=query)


def wait_for(condition: Callable[[], bool], running: Any, timeout: float = 180) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert running.isActive, running.exception()
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.5)


@pytest.fixture
def target(redis_server: RedisServer, tmp_path: Path) -> Target:
    return Target(redis_url=redis_server.url, checkpoint=str(tmp_path / "checkpoint"), trigger_ms=300)


def views_per_group(views: list[Any]) -> Any:
    return views.groupBy(F.window("eventTime", f"{WINDOW_MS} milliseconds"), "country", "os").agg(
        F.count(F.lit(1)).alias("views"))


def test_own_query_grouped_by_nullable_columns_delivers_every_group_null_ones_included(
        spark: Any, kafka_broker: KafkaBroker, redis: redis_lib.Redis, target: Target, unique_name: str,
        caplog: pytest.LogCaptureFixture) -> None:
    topic = f"{unique_name}-views"
    kafka_broker.create_topic(topic, partitions=2)
    rng = random.Random(38)
    # null and the strings that spell it are four different countries; (null, null) is no result.
    countries, systems = [None, "null", "None", "", "de"], [None, "ios", "android"]
    events = [{"id": f"v-{n}", "country": rng.choice(countries), "os": rng.choice(systems), "ts": START_MS + n * 25}
              for n in range(600)]
    produce(kafka_broker.bootstrap, topic, events)

    expected = Counter((stamp(e["ts"] - e["ts"] % WINDOW_MS), e["country"], e["os"]) for e in events
                       if (e["country"], e["os"]) != (None, None))
    all_null = sum(1 for e in events if (e["country"], e["os"]) == (None, None))
    assert sum(1 for _start, country, _os in expected if country is None) >= 10 and all_null > 0

    with caplog.at_level(logging.WARNING, logger="sparkwire.spark"):
        running = deliver(source_query(kafka_broker.bootstrap, topic, views_per_group), spark=spark,
                          stream=unique_name, key=("country", "os"), mode="update",
                          id_from=("window", "country", "os"), window="window", target=target)
        reader = ReplayLogReader(redis, unique_name)

        def newest() -> dict[str, dict[str, Any]]:
            latest: dict[str, dict[str, Any]] = {}
            for entry in reader.iter_all():
                data = json.loads(entry.data)
                if data["revision"] >= latest.get(data["processingId"], {"revision": -1})["revision"]:
                    latest[data["processingId"]] = {**data, "key": entry.key}
            return latest

        try:
            # Every event read by a finished batch (progress is reported once the sink has committed it).
            wait_for(lambda: sum(p["numInputRows"] for p in running.recentProgress) >= len(events), running)
        finally:
            running.stop()

    latest = newest()
    found = {(d["window"]["start"], d["country"], d["os"]): d["views"] for d in latest.values()}
    assert found == dict(expected)
    for data in latest.values():
        assert data["processingId"] == derive_id([data["window"], data["country"], data["os"]])
    # Within a window, each group is a result of its own, with a key of its own.
    keys = {(d["country"], d["os"]): d["key"] for d in latest.values()}
    assert len(set(keys.values())) == len(keys) == len(countries) * len(systems) - 1
    assert set(reader.snapshot().items) == set(keys.values())
    # The all-null rows are counted and said once.
    assert REGISTRY.get_sample_value("sparkwire_sink_rows_skipped_total", {"stream": unique_name}) >= 1
    said = [r for r in caplog.records if "are all null" in r.getMessage() and unique_name in r.getMessage()]
    assert len(said) == 1


def orders_per_region(window: str | tuple[str, str]) -> Callable[[Any], Any]:
    def query(views: Any) -> Any:
        windows = views.groupBy(F.window("eventTime", f"{WINDOW_MS} milliseconds"), "os").agg(
            F.count(F.lit(1)).alias("views"))
        if isinstance(window, str):
            return windows.select("window", "os", "views")
        return windows.select(F.col("window.start").alias(window[0]), F.col("window.end").alias(window[1]),
                              "os", "views")
    return query


@pytest.mark.parametrize("window", ["window", ("windowStart", "windowEnd")], ids=["struct", "timestamp-columns"])
def test_own_query_window_struct_gets_the_rebuild_of_a_lost_log(
        spark: Any, kafka_broker: KafkaBroker, redis: redis_lib.Redis, target: Target, unique_name: str,
        window: str | tuple[str, str], caplog: pytest.LogCaptureFixture) -> None:
    """Append mode, timestamps for window bounds: the rebuild must read them in milliseconds, from a struct's
    fields or from columns."""
    topic = f"{unique_name}-views"
    kafka_broker.create_topic(topic, partitions=2)
    events = [{"id": f"v-{n}", "country": "de", "os": ["ios", "android"][n % 2], "ts": START_MS + n * 50}
              for n in range(400)]

    def closed(upto: int) -> dict[tuple[str, str], int]:
        """The windows Spark's append mode has emitted once events ``0..upto-1`` are read: those whose end is
        at or below the newest event time minus the delay."""
        watermark = max(e["ts"] for e in events[:upto]) - DELAY_MS
        found = Counter((e["ts"] - e["ts"] % WINDOW_MS, e["os"]) for e in events[:upto])
        return {(stamp(start), os): n for (start, os), n in found.items() if start + WINDOW_MS <= watermark}

    start_field = (lambda d: d["window"]["start"]) if window == "window" else (lambda d: d["windowStart"])
    id_from = ("window", "os") if window == "window" else ("windowEnd", "os")
    produce(kafka_broker.bootstrap, topic, events[:200])
    running = deliver(source_query(kafka_broker.bootstrap, topic, orders_per_region(window)), spark=spark,
                      stream=unique_name, key="os", mode="append", id_from=id_from, window=window, target=target)
    reader = ReplayLogReader(redis, unique_name)
    try:
        wait_for(lambda: reader.meta().last_seq == len(closed(200)) == 8, running)
        descriptor = json.loads(reader.descriptor() or "{}")
        before = reader.meta()
        redis.delete(*redis.keys(f"sparkwire:{{{unique_name}}}:*"))  # the log lost, as after a FLUSHALL
        produce(kafka_broker.bootstrap, topic, events[200:])
        wait_for(lambda: reader.meta().last_seq == len(closed(400)) == 18, running)
    finally:
        running.stop()
    assert descriptor["rebuild"] == "available"
    assert descriptor["window"] == (["window.start", "window.end"] if window == "window" else list(window))
    meta = reader.meta()
    assert meta.epoch != before.epoch and meta.counters.get("rebuilds") == 1
    assert "history_lost" not in meta.counters
    entries = list(reader.iter_all())
    found = {(start_field(d), d["os"]): d["views"] for d in (json.loads(e.data) for e in entries)}
    assert len(found) == len(entries) and found == closed(400)
    assert not [r for r in caplog.records if "cannot be rebuilt" in r.getMessage()]


def test_own_query_without_window_says_at_start_that_a_lost_log_cannot_be_rebuilt(
        spark: Any, kafka_broker: KafkaBroker, redis: redis_lib.Redis, target: Target, unique_name: str,
        caplog: pytest.LogCaptureFixture) -> None:
    topic = f"{unique_name}-views"
    kafka_broker.create_topic(topic, partitions=1)
    with caplog.at_level(logging.WARNING, logger="sparkwire.spark"):
        running = deliver(source_query(kafka_broker.bootstrap, topic, orders_per_region("window")), spark=spark,
                          stream=unique_name, key="os", mode="update", id_from=("window", "os"), target=target)
        running.stop()
    said = [r for r in caplog.records if "cannot be rebuilt" in r.getMessage()]
    assert len(said) == 1 and said[0].levelno == logging.WARNING
    assert "give window='window' (the window struct column)" in said[0].getMessage()
