"""Rows of any Spark schema -> JSON payloads, losslessly (docs/deliver-your-own-query.md, "Encoding").

| Spark type                         | JSON                                                      |
|------------------------------------|-----------------------------------------------------------|
| null (any type)                    | ``null``                                                  |
| boolean                            | ``true`` / ``false``                                      |
| byte, short, int, long             | number (exact in the text; JavaScript rounds above 2^53)  |
| float, double                      | number; NaN and infinities as ``"NaN"``, ``"Infinity"``, ``"-Infinity"`` |
| decimal(p, s)                      | string of its exact digits, e.g. ``"12.50"`` (JavaScript would round a number) |
| string                             | string                                                    |
| binary                             | base64 string                                             |
| date                               | ``"YYYY-MM-DD"``                                          |
| timestamp                          | ``"YYYY-MM-DDTHH:MM:SS.ffffffZ"`` (UTC, microseconds)     |
| timestamp_ntz                      | ``"YYYY-MM-DDTHH:MM:SS.ffffff"``                          |
| array                              | array                                                     |
| struct                             | object, fields in schema order                            |
| map with string keys               | object                                                    |
| map with other keys                | array of ``[key, value]`` pairs, in key order            |

Intervals, variants and user-defined types have no encoding: :func:`check_encodable` names them before
a query starts. Timestamps are turned into microseconds inside Spark (:func:`prepare`): PySpark would
hand them to Python as naive datetimes in the driver's local time zone, which is ambiguous once a year.
"""

from __future__ import annotations

import base64
import datetime as dt
import math
from collections.abc import Callable
from decimal import Decimal
from typing import Any

from sparkwire.spark.types import JsonValue

Encoder = Callable[[Any], JsonValue]
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


class UnencodableSchema(ValueError):
    """The result schema has a column the JSON encoding cannot represent."""


def _unencodable(data_type: Any) -> str | None:
    from pyspark.sql import types as T

    if isinstance(data_type, T.ArrayType):
        return _unencodable(data_type.elementType)
    if isinstance(data_type, T.MapType):
        return _unencodable(data_type.keyType) or _unencodable(data_type.valueType)
    if isinstance(data_type, T.StructType):
        for field in data_type.fields:
            reason = _unencodable(field.dataType)
            if reason:
                return reason
        return None
    supported = (T.NullType, T.BooleanType, T.ByteType, T.ShortType, T.IntegerType, T.LongType, T.FloatType,
                 T.DoubleType, T.DecimalType, T.StringType, T.BinaryType, T.DateType, T.TimestampType,
                 T.TimestampNTZType)
    return None if isinstance(data_type, supported) else data_type.simpleString()


def check_encodable(schema: Any) -> None:
    """Raise :class:`UnencodableSchema` naming every column whose type has no JSON encoding."""
    bad = [f"{field.name} ({reason})" for field in schema.fields if (reason := _unencodable(field.dataType))]
    if bad:
        raise UnencodableSchema(
            f"these result columns have no JSON encoding: {', '.join(bad)}; cast them (e.g. an interval to "
            "its seconds as a long) before delivering")


def _micros_expression(column: Any, data_type: Any) -> Any:
    """``column`` with every timestamp inside it replaced by its microseconds since the epoch (a long)."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    if isinstance(data_type, T.TimestampType):
        return F.unix_micros(column)
    if isinstance(data_type, T.ArrayType) and _has_timestamp(data_type.elementType):
        return F.transform(column, lambda item: _micros_expression(item, data_type.elementType))
    if isinstance(data_type, T.MapType):
        if _has_timestamp(data_type.keyType):
            column = F.transform_keys(column, lambda key, _value: _micros_expression(key, data_type.keyType))
        if _has_timestamp(data_type.valueType):
            column = F.transform_values(column, lambda _key, value: _micros_expression(value, data_type.valueType))
        return column
    if isinstance(data_type, T.StructType) and _has_timestamp(data_type):
        return F.when(column.isNull(), F.lit(None)).otherwise(F.struct(*[
            _micros_expression(column[field.name], field.dataType).alias(field.name) for field in data_type.fields]))
    return column


def _has_timestamp(data_type: Any) -> bool:
    from pyspark.sql import types as T

    if isinstance(data_type, T.TimestampType):
        return True
    if isinstance(data_type, T.ArrayType):
        return _has_timestamp(data_type.elementType)
    if isinstance(data_type, T.MapType):
        return _has_timestamp(data_type.keyType) or _has_timestamp(data_type.valueType)
    if isinstance(data_type, T.StructType):
        return any(_has_timestamp(field.dataType) for field in data_type.fields)
    return False


def prepare(frame: Any) -> Any:
    """``frame`` ready to collect for :func:`row_encoder`: timestamps as microseconds, nothing else changed."""
    from pyspark.sql import functions as F

    if not _has_timestamp(frame.schema):
        return frame
    return frame.select(*[
        _micros_expression(F.col(f"`{field.name}`"), field.dataType).alias(field.name)
        for field in frame.schema.fields])


def _float(value: float) -> JsonValue:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    return value


def _timestamp(micros: int) -> str:
    moment = _EPOCH + dt.timedelta(microseconds=micros)
    return moment.replace(tzinfo=None).isoformat(timespec="microseconds") + "Z"  # isoformat pads the year


def _timestamp_ntz(value: dt.datetime) -> str:
    return value.isoformat(timespec="microseconds")


def _decimal(value: Decimal) -> str:
    return format(value, "f")


def _leaf(data_type: Any) -> Encoder:
    from pyspark.sql import types as T

    if isinstance(data_type, (T.FloatType, T.DoubleType)):
        return _float
    if isinstance(data_type, T.DecimalType):
        return _decimal
    if isinstance(data_type, T.BinaryType):
        return lambda value: base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(data_type, T.DateType):
        return lambda value: value.isoformat()
    if isinstance(data_type, T.TimestampType):
        return _timestamp
    if isinstance(data_type, T.TimestampNTZType):
        return _timestamp_ntz
    return lambda value: value


def encoder(data_type: Any) -> Encoder:
    """The encoder of one value of ``data_type`` as :func:`prepare` leaves it (None -> null at every level)."""
    from pyspark.sql import types as T

    inner: Encoder
    if isinstance(data_type, T.ArrayType):
        item = encoder(data_type.elementType)
        inner = lambda value: [item(v) for v in value]  # noqa: E731
    elif isinstance(data_type, T.StructType):
        fields = [(field.name, encoder(field.dataType)) for field in data_type.fields]
        inner = lambda value: {name: encode(value[name]) for name, encode in fields}  # noqa: E731
    elif isinstance(data_type, T.MapType):
        key, val = encoder(data_type.keyType), encoder(data_type.valueType)
        if isinstance(data_type.keyType, T.StringType):
            inner = lambda value: {k: val(v) for k, v in sorted(value.items())}  # noqa: E731
        else:
            inner = lambda value: [[key(k), val(v)] for k, v in sorted(value.items())]  # noqa: E731
    else:
        inner = _leaf(data_type)
    return lambda value: None if value is None else inner(value)


def row_encoder(schema: Any) -> Callable[[Any], dict[str, JsonValue]]:
    """A collected row of :func:`prepare` (d) ``schema`` -> its JSON object, columns in schema order."""
    fields = [(field.name, encoder(field.dataType)) for field in schema.fields]
    return lambda row: {name: encode(row[name]) for name, encode in fields}
