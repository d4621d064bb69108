"""The JSON encoding of every supported Spark type, on values as PySpark hands them over after ``prepare``
(timestamps already microseconds). The same encoding over a real Spark collect: test_deliver_checks.py."""

from __future__ import annotations

import datetime as dt
import json
from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pyspark.sql import types as T

from sparkwire.spark.results.encoding import UnencodableSchema, check_encodable, encoder, row_encoder

SCHEMA = T.StructType([
    T.StructField("b", T.BooleanType()),
    T.StructField("i", T.IntegerType()),
    T.StructField("l", T.LongType()),
    T.StructField("d", T.DoubleType()),
    T.StructField("dec", T.DecimalType(20, 2)),
    T.StructField("s", T.StringType()),
    T.StructField("bin", T.BinaryType()),
    T.StructField("day", T.DateType()),
    T.StructField("ts", T.TimestampType()),
    T.StructField("ntz", T.TimestampNTZType()),
    T.StructField("arr", T.ArrayType(T.DoubleType())),
    T.StructField("st", T.StructType([T.StructField("x", T.LongType()), T.StructField("y", T.StringType())])),
    T.StructField("m", T.MapType(T.StringType(), T.LongType())),
    T.StructField("mi", T.MapType(T.IntegerType(), T.StringType())),
])


def test_every_supported_type_has_its_documented_json() -> None:
    row = {"b": True, "i": 7, "l": 2**62, "d": float("nan"), "dec": Decimal("12.50"), "s": "é",
           "bin": bytearray(b"\x00\xff"), "day": dt.date(2026, 11, 24), "ts": 1_700_000_000_123_456,
           "ntz": dt.datetime(2026, 11, 24, 10, 0, 0, 5), "arr": [1.5, float("inf"), None],
           "st": {"x": 1, "y": None}, "m": {"b": 2, "a": 1}, "mi": {2: "two", 1: "one"}}
    encoded = row_encoder(SCHEMA)(row)
    assert encoded == {
        "b": True, "i": 7, "l": 2**62, "d": "NaN", "dec": "12.50", "s": "é", "bin": "AP8=", "day": "2026-11-24",
        "ts": "2023-11-14T22:13:20.123456Z", "ntz": "2026-11-24T10:00:00.000005", "arr": [1.5, "Infinity", None],
        "st": {"x": 1, "y": None}, "m": {"a": 1, "b": 2}, "mi": [[1, "one"], [2, "two"]]}
    json.dumps(encoded, allow_nan=False)  # valid JSON: no NaN or Infinity literals


def test_nulls_encode_as_null_at_every_level() -> None:
    assert row_encoder(SCHEMA)({field.name: None for field in SCHEMA.fields}) == {f.name: None for f in SCHEMA.fields}


@given(st.decimals(allow_nan=False, allow_infinity=False, places=4, min_value=-10**12, max_value=10**12))
def test_a_decimal_keeps_every_digit(value: Decimal) -> None:
    text = encoder(T.DecimalType(30, 4))(value)
    assert isinstance(text, str) and Decimal(text) == value


@given(st.integers(min_value=-62_135_596_800_000_000, max_value=253_402_300_799_999_999))
def test_a_timestamp_keeps_its_microsecond(micros: int) -> None:
    text = encoder(T.TimestampType())(micros)
    assert isinstance(text, str)
    assert len(text) == 27 and text.endswith("Z")
    parsed = dt.datetime.fromisoformat(text[:-1]).replace(tzinfo=dt.UTC)
    epoch = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
    assert (parsed - epoch) // dt.timedelta(microseconds=1) == micros


@pytest.mark.parametrize("data_type", [T.DayTimeIntervalType(), T.YearMonthIntervalType(), T.CalendarIntervalType(),
                                       T.ArrayType(T.DayTimeIntervalType()), T.VariantType()])
def test_types_without_an_encoding_are_named_before_anything_runs(data_type: T.DataType) -> None:
    schema = T.StructType([T.StructField("fine", T.LongType()), T.StructField("bad", data_type)])
    with pytest.raises(UnencodableSchema, match="bad"):
        check_encodable(schema)
    check_encodable(SCHEMA)
