"""``deliver`` on a real SparkSession and Redis: what it refuses, before anything is written; and every
supported type through a real micro-batch into the log, in a driver whose local time zone is not UTC."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis as redis_lib
from pyspark.sql import functions as F

from sparkwire.replaylog import ReplayLogReader
from sparkwire.spark import DeliveryError, Target, UnencodableSchema, deliver
from sparkwire_harness.stack import RedisServer

pytestmark = pytest.mark.slow


@pytest.fixture
def target(redis_server: RedisServer, tmp_path: Path) -> Target:
    return Target(redis_url=redis_server.url, checkpoint=str(tmp_path / "checkpoint"), trigger_ms=200)


def rate(spark: Any) -> Any:
    return spark.readStream.format("rate").option("rowsPerSecond", 20).load()


def assert_nothing_written(redis: redis_lib.Redis, stream: str, target: Target) -> None:
    assert redis.keys(f"*{{{stream}}}*") == []
    assert not Path(target.checkpoint).exists()


REFUSALS: list[tuple[str, Any, dict[str, Any], type[Exception], str]] = [
    ("a random id", lambda df: df.withColumn("id", F.rand().cast("string")), {"id_column": "id", "key": "value"},
     DeliveryError, "non-deterministic"),
    ("an id derived from a uuid", lambda df: df.withColumn("u", F.expr("uuid()")), {"id_from": ("u",), "key": "value"},
     DeliveryError, "non-deterministic"),
    ("a key from a random number", lambda df: df.withColumn("k", (F.rand() * 3).cast("int")),
     {"id_from": ("value",), "key": "k"}, DeliveryError, "non-deterministic"),
    ("an aggregation without a watermark", lambda df: df.groupBy((F.col("value") % 3).alias("k")).count(),
     {"id_from": ("k",), "key": "k", "mode": "update"}, DeliveryError, "watermark"),
    ("an interval column", lambda df: df.withColumn("span", F.make_dt_interval(F.lit(1))),
     {"id_from": ("value",), "key": "value"}, UnencodableSchema, "span"),
    ("complete mode", lambda df: df, {"id_from": ("value",), "key": "value", "mode": "complete"},
     DeliveryError, "complete"),
    ("a missing column", lambda df: df, {"id_from": ("nope",), "key": "value"}, DeliveryError, "no column 'nope'"),
]


@pytest.mark.parametrize(("case", "build", "options", "error", "message"), REFUSALS, ids=[r[0] for r in REFUSALS])
def test_own_query_refused_before_anything_is_written(
    spark: Any, redis: redis_lib.Redis, target: Target, unique_name: str,
    case: str, build: Any, options: dict[str, Any], error: type[Exception], message: str,
) -> None:
    with pytest.raises(error, match=message):
        deliver(build(rate(spark)), stream=unique_name, target=target, **options)
    assert_nothing_written(redis, unique_name, target)


def test_own_query_a_batch_dataframe_is_refused(spark: Any, redis: redis_lib.Redis, target: Target,
                                                unique_name: str) -> None:
    with pytest.raises(DeliveryError, match="streaming DataFrame"):
        deliver(spark.range(3), stream=unique_name, key="id", id_from=("id",), target=target)
    assert_nothing_written(redis, unique_name, target)


@pytest.fixture
def new_york_time() -> Iterator[None]:
    """The driver's local zone is not UTC: PySpark would turn timestamps into New York wall-clock times."""
    before = os.environ.get("TZ")
    os.environ["TZ"] = "America/New_York"
    time.tzset()
    yield
    if before is None:
        del os.environ["TZ"]
    else:
        os.environ["TZ"] = before
    time.tzset()


def expected_payload(n: int) -> dict[str, Any]:
    """What row ``n`` of the typed stream below must become, computed without Spark."""
    millis = 1_700_000_000_000 + n * 1_001
    seconds, ms = divmod(millis, 1000)
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds)) + f".{ms:03d}000Z"
    return {
        "n": n, "key": f"k{n % 3}", "price": f"{n}.05", "ratio": "NaN" if n % 5 == 0 else n / 4, "at": stamp,
        "day": "2026-11-24", "tags": [f"t{n}", None], "nested": {"at": stamp, "flag": n % 2 == 0},
        "counts": {"a": n, "b": None}, "raw": "AQI=", "nothing": None, "processingId": f"id-{n}",
    }


def test_own_query_every_type_reaches_the_log_as_documented(
    spark: Any, redis: redis_lib.Redis, target: Target, unique_name: str, new_york_time: None,
) -> None:
    at = F.timestamp_millis(F.lit(1_700_000_000_000) + F.col("value") * 1_001)
    typed = rate(spark).select(
        F.col("value").alias("n"),
        F.concat(F.lit("k"), (F.col("value") % 3).cast("string")).alias("key"),
        (F.col("value").cast("decimal(20,2)") + F.lit(0.05).cast("decimal(3,2)")).alias("price"),
        F.when(F.col("value") % 5 == 0, F.lit(float("nan"))).otherwise(F.col("value") / 4).alias("ratio"),
        at.alias("at"),
        F.to_date(F.lit("2026-11-24")).alias("day"),
        F.array(F.concat(F.lit("t"), F.col("value").cast("string")), F.lit(None).cast("string")).alias("tags"),
        F.struct(at.alias("at"), (F.col("value") % 2 == 0).alias("flag")).alias("nested"),
        F.create_map(F.lit("a"), F.col("value"), F.lit("b"), F.lit(None).cast("long")).alias("counts"),
        F.unhex(F.lit("0102")).alias("raw"),
        F.lit(None).cast("string").alias("nothing"),
        F.concat(F.lit("id-"), F.col("value").cast("string")).alias("processingId"),
    )
    query = deliver(typed, stream=unique_name, key="key", id_column="processingId", event_time="at", target=target)
    reader = ReplayLogReader(redis, unique_name)
    try:
        deadline = time.monotonic() + 90
        while reader.meta().last_seq < 30:
            assert time.monotonic() < deadline and query.isActive, query.exception()
            time.sleep(0.5)
    finally:
        query.stop()
    entries = reader.read_after(0, 10_000)
    payloads = {json.loads(e.data)["n"]: json.loads(e.data) for e in entries}
    assert len(payloads) == len(entries) >= 30
    for n, payload in payloads.items():
        assert payload == expected_payload(n)
    assert sorted(payloads) == list(range(len(payloads)))  # gap-free: rows 0..N-1, each once
    descriptor = json.loads(redis.get(f"sparkwire:{{{unique_name}}}:descriptor") or b"{}")
    assert descriptor["key"] == ["key"] and descriptor["mode"] == "append"
    assert descriptor["rebuild"].startswith("the query was given as a DataFrame")
