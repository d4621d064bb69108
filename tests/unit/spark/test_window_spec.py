"""``window=``: Spark's window struct column or a pair of columns; what the rebuild cannot read is refused
before the query starts, with the form to use; without it, the reason names the fix."""

from __future__ import annotations

import json

import pytest
from pyspark.sql import types as T

from sparkwire.spark.delivery.deliver import window_unnamed
from sparkwire.spark.stream import DeliveryError, StreamSpec

WINDOW = T.StructType([T.StructField("start", T.TimestampType()), T.StructField("end", T.TimestampType())])
SCHEMA = T.StructType([
    T.StructField("window", WINDOW),
    T.StructField("windowStart", T.LongType()),
    T.StructField("windowEnd", T.LongType()),
    T.StructField("region", T.StringType()),
    T.StructField("label", T.StringType()),
    T.StructField("orders", T.LongType()),
    T.StructField("when", T.StructType([T.StructField("at", T.TimestampType())])),
    T.StructField("bad", T.StructType([T.StructField("start", T.StringType()), T.StructField("end", T.StringType())])),
])


def spec(window: object, **options: object) -> StreamSpec:
    return StreamSpec(stream="orders", key="region", id_from=("window", "region"), window=window,  # type: ignore[arg-type]
                      **options)  # type: ignore[arg-type]


def test_the_window_struct_column_is_the_windows_start_and_end() -> None:
    struct = spec("window")
    struct.check_columns(SCHEMA)
    assert struct.window_bounds == (("window", "start"), ("window", "end"))
    assert struct.window_columns == ("window",)
    descriptor = struct.descriptor(SCHEMA, "available")
    assert descriptor["window"] == ["window.start", "window.end"]
    assert "window" not in descriptor["valueFields"]  # type: ignore[operator]
    json.dumps(descriptor)


def test_a_pair_of_columns_is_as_before_and_a_list_is_taken_as_a_pair() -> None:
    pair = spec(["windowStart", "windowEnd"])
    pair.check_columns(SCHEMA)
    assert pair.window == ("windowStart", "windowEnd")
    assert pair.window_bounds == (("windowStart",), ("windowEnd",))
    assert pair.descriptor(SCHEMA, "available")["window"] == ["windowStart", "windowEnd"]
    assert spec(None).window_bounds is None and spec(None).window_columns == ()


@pytest.mark.parametrize(("window", "message"), [
    ("region", r"window='region' names a string column, not a struct with fields start and end.*window=\"window\""),
    ("when", "names a struct<at:timestamp> column, not a struct with fields start and end"),
    ("bad", r"bad\.start \(string\), bad\.end \(string\) is neither a timestamp nor epoch milliseconds"),
    (("region", "windowEnd"), r"region \(string\) is neither"),
    (("window.start", "window.end"), "names fields of the struct column 'window': give the struct itself, "
                                     "window='window'"),
    ("nope", "no column 'nope'"),
])
def test_a_window_the_rebuild_cannot_read_is_refused_with_the_form_to_use(window: object, message: str) -> None:
    with pytest.raises(DeliveryError, match=message):
        spec(window).check_columns(SCHEMA)


@pytest.mark.parametrize("window", ["", ("windowStart",), ("a", "b", "c"), ("a", "")])
def test_a_window_of_no_known_form_is_refused_when_the_spec_is_made(window: object) -> None:
    with pytest.raises(DeliveryError, match="window= takes Spark's window struct column"):
        spec(window)


def test_without_window_the_reason_names_the_struct_to_give() -> None:
    assert window_unnamed(spec("window"), SCHEMA) is None
    assert "give window='window' (the window struct column)" in (window_unnamed(spec(None), SCHEMA) or "")
    flat = T.StructType([f for f in SCHEMA.fields if f.name not in ("window", "bad")])
    assert "give window=(start column, end column)" in (window_unnamed(spec(None), flat) or "")


def test_without_an_event_time_a_struct_windows_end_orders_the_batch() -> None:
    """A key's newest window is its last entry of the batch, and so the state's entry for it."""
    from sparkwire.spark.results.records import ResultEncoder

    schema = T.StructType([T.StructField("window", T.StructType([T.StructField("start", T.LongType()),
                                                                  T.StructField("end", T.LongType())])),
                           T.StructField("region", T.StringType()), T.StructField("orders", T.LongType())])
    update = StreamSpec(stream="orders", key="region", mode="update", id_from=("window", "region"), window="window")
    rows = [{"window": {"start": start, "end": start + 10}, "region": region, "orders": 1}
            for start in (30, 0, 20, 10) for region in ("us", "eu")]
    records = ResultEncoder(update, schema).encode(rows, revision=5).records
    ends = [(json.loads(r.payload)["window"]["end"], r.key) for r in records]
    assert ends == sorted(ends) and ends[-1] == (40, "us")
