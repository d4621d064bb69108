"""Rows -> records: ids, revisions, keys, skipped rows and the order within a batch."""

from __future__ import annotations

import json
import random

from pyspark.sql import types as T

from sparkwire.spark.results.records import ResultEncoder, derive_id, key_text
from sparkwire.spark.stream import StreamSpec

SCHEMA = T.StructType([
    T.StructField("windowStart", T.TimestampType()),
    T.StructField("windowEnd", T.TimestampType()),
    T.StructField("region", T.StringType()),
    T.StructField("revenue", T.DecimalType(20, 2)),
])
UPDATE = StreamSpec(stream="orders", key="region", mode="update", id_from=("windowEnd", "region"),
                    event_time="windowEnd", window=("windowStart", "windowEnd"))


def row(end_s: int, region: str | None, revenue: str = "1.00") -> dict[str, object]:
    from decimal import Decimal

    return {"windowStart": (end_s - 10) * 1_000_000, "windowEnd": end_s * 1_000_000, "region": region,
            "revenue": Decimal(revenue)}


def test_update_mode_gives_each_revision_its_own_id_and_the_payload_the_result_id_and_revision() -> None:
    encoder = ResultEncoder(UPDATE, SCHEMA)
    first = encoder.encode([row(20, "eu", "5.00")], revision=3).records[0]
    again = encoder.encode([row(20, "eu", "7.50")], revision=4).records[0]
    result_id = derive_id(["1970-01-01T00:00:20.000000Z", "eu"])
    assert (first.processing_id, again.processing_id) == (f"{result_id}@3", f"{result_id}@4")
    assert json.loads(again.payload) == {
        "windowStart": "1970-01-01T00:00:10.000000Z", "windowEnd": "1970-01-01T00:00:20.000000Z", "region": "eu",
        "revenue": "7.50", "processingId": result_id, "revision": 4}
    assert first.key == again.key == "eu"


def test_append_mode_ids_are_the_results_and_the_same_on_every_run() -> None:
    spec = StreamSpec(stream="orders", key="region", id_from=("windowEnd", "region"), event_time="windowEnd")
    encoder = ResultEncoder(spec, SCHEMA)
    a = encoder.encode([row(20, "eu")], revision=1).records[0]
    b = encoder.encode([row(20, "eu")], revision=9).records[0]
    assert a == b and "revision" not in json.loads(a.payload)


def test_rows_without_a_key_or_id_are_skipped_and_counted() -> None:
    batch = ResultEncoder(UPDATE, SCHEMA).encode([row(20, None), row(20, "eu")], revision=0)
    assert batch.skipped == 1 and [r.key for r in batch.records] == ["eu"]


def test_a_batch_is_ordered_by_event_time_then_key_whatever_order_spark_returns() -> None:
    rows = [row(end, region) for end in (10, 20, 30) for region in ("us", "eu", "ap")]
    encoder = ResultEncoder(UPDATE, SCHEMA)
    expected = encoder.encode(rows, revision=2).records
    shuffled = rows[:]
    random.Random(7).shuffle(shuffled)
    assert encoder.encode(shuffled, revision=2).records == expected
    ends = [json.loads(r.payload)["windowEnd"] for r in expected]
    assert ends == sorted(ends) and [r.key for r in expected[:3]] == ["ap", "eu", "us"]


def test_keys_of_several_columns_or_of_other_types_are_joined_as_json() -> None:
    assert key_text(["eu"]) == "eu"
    assert key_text(["eu", 3]) == "eu/3"
    assert key_text([7]) == "7"
