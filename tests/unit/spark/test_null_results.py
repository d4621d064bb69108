"""Null is a value: results whose key or id columns are partly null are delivered, their nulls encoded apart
from every string; only a row whose key columns are all null is no result (skipped, counted, logged once)."""

from __future__ import annotations

import itertools
import json
import logging
from types import SimpleNamespace
from typing import Any

import pytest
from prometheus_client import REGISTRY
from pyspark.sql import types as T

from sparkwire.spark.delivery.faults import FaultInjector
from sparkwire.spark.delivery.sink import ReplayLogSink
from sparkwire.spark.results.records import ResultEncoder, derive_id, key_text
from sparkwire.spark.stream import DeliveryError, StreamSpec
from sparkwire.spark.types import JsonValue

# What a string can spell that a careless encoding would confuse with null, or with a join of several values.
TRICKY: list[JsonValue] = [None, "null", "None", "", "a", "/", "a/", "/a", "[null", "null]", '"', ",", "a/null",
                           '["a",null]', "\\u002f"]

SCHEMA = T.StructType([
    T.StructField("windowEnd", T.LongType()),
    T.StructField("country", T.StringType()),
    T.StructField("os", T.StringType()),
    T.StructField("views", T.LongType()),
])
VIEWS = StreamSpec(stream="views", key=("country", "os"), mode="update", id_from=("windowEnd", "country", "os"),
                   event_time="windowEnd")


def view(country: str | None, os: str | None, views: int = 1, end: int = 2_000) -> dict[str, Any]:
    return {"windowEnd": end, "country": country, "os": os, "views": views}


@pytest.mark.parametrize("columns", [2, 3])
def test_a_key_with_a_null_is_told_apart_from_every_other_key(columns: int) -> None:
    keys = list(itertools.product(TRICKY, repeat=columns))
    texts: dict[str, tuple[JsonValue, ...]] = {}
    for values in keys:
        text = key_text(list(values))
        if None in values:
            assert "/" not in text, (values, text)
            other = texts.setdefault(text, values)
            assert other == values, f"{values} and {other} share the key {text!r}"
    # Keys without nulls keep the form they always had (a running stream's state keys stay the same), and
    # none of them is a null key's text.
    plain = {key_text(list(values)) for values in keys if None not in values}
    assert not plain & set(texts)
    assert key_text(["eu", 3]) == "eu/3" and key_text(["eu"]) == "eu" and key_text([7]) == "7"


def test_a_null_key_is_the_json_array_of_its_values() -> None:
    assert key_text(["de", None]) == '["de",null]'
    assert key_text([None, "null"]) == '[null,"null"]'
    assert json.loads(key_text(["a/b", None])) == ["a/b", None]  # '/' escaped as \u002f, still JSON
    assert key_text(["de", None]) == key_text(["de", None])  # the same on every run


def test_an_id_derived_from_a_null_differs_from_the_strings_that_spell_null() -> None:
    ids = {derive_id([2000, value, "ios"]) for value in (None, "null", "None", "")}
    assert len(ids) == 4
    assert derive_id([2000, None, "ios"]) == derive_id([2000, None, "ios"])


def test_results_with_a_partly_null_key_are_delivered_and_all_null_keys_skipped() -> None:
    rows = [view("de", "ios"), view(None, "ios"), view("null", "ios"), view("None", "ios"), view("", "ios"),
            view("de", None), view(None, None, views=99)]
    batch = ResultEncoder(VIEWS, SCHEMA).encode(rows, revision=4)
    assert batch.skipped == 1  # (null, null): no result, as the metrics job's heartbeat windows
    assert len(batch.records) == 6
    assert len({r.key for r in batch.records}) == 6
    assert len({r.processing_id for r in batch.records}) == 6
    payloads = {(p["country"], p["os"]): p for p in (json.loads(r.payload) for r in batch.records)}
    assert payloads[(None, "ios")]["processingId"] == derive_id([2000, None, "ios"])
    assert payloads[(None, "ios")]["views"] == 1 and (None, None) not in payloads
    again = ResultEncoder(VIEWS, SCHEMA).encode(list(reversed(rows)), revision=4)
    assert again.records == batch.records  # deterministic, whatever order Spark returns


def test_an_id_column_that_is_null_on_a_result_fails_the_batch_with_the_fix() -> None:
    schema = T.StructType([T.StructField("id", T.StringType()), T.StructField("country", T.StringType()),
                           T.StructField("os", T.StringType())])
    spec = StreamSpec(stream="views", key=("country", "os"), id_column="id")
    encoder = ResultEncoder(spec, schema)
    assert encoder.encode([{"id": None, "country": None, "os": None}], revision=0).skipped == 1
    with pytest.raises(DeliveryError, match=r"null id_column 'id'.*id_from"):
        encoder.encode([{"id": None, "country": "de", "os": None}], revision=0)


def test_the_metrics_jobs_heartbeat_rows_stay_skipped() -> None:
    """The metrics job's rebuild runs ``pipeline.window_results``, where a heartbeat is a window of the null
    metric with a null processingId: its one key column is null, so it is still no result."""
    from sparkwire.aggregator.job import metrics_spec
    from sparkwire.aggregator.pipeline import WINDOW_SCHEMA

    heartbeat = {"processingId": None, "metricName": None, "windowStart": 0, "windowEnd": 1000, "count": 3,
                 "sum": None, "min": None, "max": None, "avg": None}
    batch = ResultEncoder(metrics_spec("metrics"), WINDOW_SCHEMA).encode([heartbeat], revision=0)
    assert (batch.skipped, batch.records) == (1, [])


def skipped(stream: str) -> float:
    return REGISTRY.get_sample_value("sparkwire_sink_rows_skipped_total", {"stream": stream}) or 0.0


def test_the_sink_counts_rows_without_a_key_per_stream_and_logs_them_once(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setattr("sparkwire.spark.delivery.sink.prepare", lambda batch: SimpleNamespace(collect=lambda: batch))
    spec = StreamSpec(stream="views-skip", key=("country", "os"), id_from=("windowEnd", "country", "os"))
    sink = ReplayLogSink(writer=None, encoder=ResultEncoder(spec, SCHEMA),  # type: ignore[arg-type]
                         faults=FaultInjector(None))
    before = skipped("views-skip")
    with caplog.at_level(logging.WARNING, logger="sparkwire.spark.delivery.sink"):
        for batch_id in range(3):
            records = sink.batch_records([view(None, None), view(None, None), view(None, "ios")], batch_id)
            assert [json.loads(r.payload)["os"] for r in records] == ["ios"]
    assert skipped("views-skip") == before + 6
    warnings = [r for r in caplog.records if "all null" in r.getMessage()]
    assert len(warnings) == 1 and "views-skip" in warnings[0].getMessage()
