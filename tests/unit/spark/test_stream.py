"""StreamSpec: what it refuses before any Spark work, and the descriptor it writes."""

from __future__ import annotations

import pytest
from pyspark.sql import types as T

from sparkwire.spark.stream import DeliveryError, StreamSpec

SCHEMA = T.StructType([
    T.StructField("windowStart", T.LongType()), T.StructField("windowEnd", T.LongType()),
    T.StructField("region", T.StringType()), T.StructField("orders", T.LongType()),
    T.StructField("revenue", T.DecimalType(20, 2)), T.StructField("note", T.StringType()),
])


@pytest.mark.parametrize(("options", "message"), [
    ({"mode": "complete"}, "'complete' re-emits every result"),
    ({"stream": "no spaces"}, "stream name"),
    ({"key": ()}, "key must name"),
    ({"id_column": "x", "id_from": ("region",)}, "exactly one of id_column"),
    ({"id_from": ()}, "exactly one of id_column"),
])
def test_what_a_spec_refuses(options: dict[str, object], message: str) -> None:
    arguments: dict[str, object] = {"stream": "orders", "key": "region", "id_from": ("windowEnd", "region"), **options}
    with pytest.raises(DeliveryError, match=message):
        StreamSpec(**arguments)  # type: ignore[arg-type]


def test_columns_are_checked_against_the_result() -> None:
    with pytest.raises(DeliveryError, match="no column 'windowStop'"):
        StreamSpec(stream="o", key="region", id_from=("windowStop",)).check_columns(SCHEMA)
    with pytest.raises(DeliveryError, match="must be a string column"):
        StreamSpec(stream="o", key="region", id_column="orders").check_columns(SCHEMA)
    clashing = T.StructType([*SCHEMA.fields, T.StructField("revision", T.LongType())])
    with pytest.raises(DeliveryError, match="clash"):
        StreamSpec(stream="o", key="region", mode="update", id_from=("region",)).check_columns(clashing)


def test_the_descriptor_names_what_a_page_needs() -> None:
    spec = StreamSpec(stream="orders", key="region", mode="update", id_from=("windowEnd", "region"),
                      event_time="windowEnd", window=("windowStart", "windowEnd"), title="Orders",
                      units={"revenue": "EUR"})
    descriptor = spec.descriptor(SCHEMA, rebuild="available")
    assert descriptor["valueFields"] == ["orders", "revenue"]  # numeric, not key, time or window
    assert descriptor["key"] == ["region"] and descriptor["eventTime"] == "windowEnd"
    assert descriptor["mode"] == "update" and descriptor["revisions"] is True
    assert descriptor["units"] == {"revenue": "EUR"} and descriptor["rebuild"] == "available"
    assert [f["name"] for f in descriptor["schema"]["fields"]][:3] == ["windowStart", "windowEnd", "region"]
