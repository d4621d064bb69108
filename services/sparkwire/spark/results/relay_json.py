"""Rows of a real-time query as Spark's own JSON (``to_json``), back to sparkwire's encoding in Python.

A real-time query's rows leave Spark through its Kafka sink (``delivery/relay.py``): no Python runs in the
query's tasks, so the row is written by ``to_json`` and the relay turns that JSON into exactly the payload
:func:`~sparkwire.spark.results.encoding.row_encoder` makes of the same row (the encoding table there).
Spark writes most types the same way; the differences are closed on one side or the other:

| Spark type | made in Spark (:func:`relay_column`) | turned in Python (:func:`relay_decoder`) |
|---|---|---|
| timestamp | microseconds (``prepare``, as the micro-batch path) | ``"YYYY-MM-DDTHH:MM:SS.ffffffZ"`` |
| timestamp_ntz | ``date_format`` with microseconds | kept |
| float | cast to double (``to_json`` would print the float's shortest text) | number |
| decimal | ``to_json`` prints its exact digits, maybe with an exponent | its digits without one (``"12.50"``) |
| map with non-string keys | ``array_sort(map_entries(m))`` | ``[key, value]`` pairs |
| map with string keys | kept | object in key order |
| struct | nulls kept (``ignoreNullFields`` false) | fields in schema order |

Everything else (null, boolean, integers, string, binary as base64, date, "NaN" and the infinities) is
written by ``to_json`` as the encoding has it.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from decimal import Decimal
from typing import Any

from sparkwire.spark.results.encoding import _timestamp, prepare
from sparkwire.spark.types import JsonValue

Decoder = Callable[[Any], JsonValue]
TO_JSON_OPTIONS = {"ignoreNullFields": "false", "timeZone": "UTC"}


def _needs_change(data_type: Any) -> bool:
    from pyspark.sql import types as T

    if isinstance(data_type, (T.FloatType, T.TimestampNTZType)):
        return True
    if isinstance(data_type, T.ArrayType):
        return _needs_change(data_type.elementType)
    if isinstance(data_type, T.MapType):
        return (not isinstance(data_type.keyType, T.StringType) or _needs_change(data_type.keyType)
                or _needs_change(data_type.valueType))
    if isinstance(data_type, T.StructType):
        return any(_needs_change(field.dataType) for field in data_type.fields)
    return False


def _column(column: Any, data_type: Any) -> Any:
    """``column`` (of ``data_type``, timestamps already microseconds) as ``to_json`` should see it."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    if not _needs_change(data_type):
        return column
    if isinstance(data_type, T.FloatType):
        return column.cast("double")
    if isinstance(data_type, T.TimestampNTZType):
        return F.date_format(column, "yyyy-MM-dd'T'HH:mm:ss.SSSSSS")
    if isinstance(data_type, T.ArrayType):
        return F.transform(column, lambda item: _column(item, data_type.elementType))
    if isinstance(data_type, T.MapType):
        if _needs_change(data_type.keyType):
            column = F.transform_keys(column, lambda key, _value: _column(key, data_type.keyType))
        if _needs_change(data_type.valueType):
            column = F.transform_values(column, lambda _key, value: _column(value, data_type.valueType))
        return column if isinstance(data_type.keyType, T.StringType) else F.array_sort(F.map_entries(column))
    return F.when(column.isNull(), F.lit(None)).otherwise(F.struct(*[
        _column(column[field.name], field.dataType).alias(field.name) for field in data_type.fields]))


def relay_columns(frame: Any) -> tuple[Any, list[Any]]:
    """``frame`` with timestamps as microseconds (:func:`prepare`), and its columns as ``to_json`` of the
    row should see them (in schema order, named as they are)."""
    from pyspark.sql import functions as F

    ready = prepare(frame)
    columns = [_column(F.col(f"`{field.name}`"), field.dataType).alias(field.name) for field in ready.schema.fields]
    return ready, columns


def _leaf(data_type: Any) -> Decoder:
    from pyspark.sql import types as T

    if isinstance(data_type, (T.FloatType, T.DoubleType)):
        return lambda value: value if isinstance(value, str) else float(value)  # "NaN", "Infinity", "-Infinity"
    if isinstance(data_type, T.DecimalType):
        return lambda value: format(Decimal(str(value)), "f")
    if isinstance(data_type, T.TimestampType):
        return lambda value: _timestamp(int(value))
    return lambda value: value


def decoder(data_type: Any) -> Decoder:
    """The decoder of one value of ``data_type`` as :func:`relay_columns` writes it (null -> null at every level)."""
    from pyspark.sql import types as T

    inner: Decoder
    if isinstance(data_type, T.ArrayType):
        item = decoder(data_type.elementType)
        inner = lambda value: [item(v) for v in value]  # noqa: E731
    elif isinstance(data_type, T.StructType):
        fields = [(field.name, decoder(field.dataType)) for field in data_type.fields]
        inner = lambda value: {name: decode(value.get(name)) for name, decode in fields}  # noqa: E731
    elif isinstance(data_type, T.MapType):
        key, val = decoder(data_type.keyType), decoder(data_type.valueType)
        if isinstance(data_type.keyType, T.StringType):
            inner = lambda value: {k: val(v) for k, v in sorted(value.items())}  # noqa: E731
        else:
            inner = lambda value: [[key(e["key"]), val(e["value"])] for e in value]  # noqa: E731
    else:
        inner = _leaf(data_type)
    return lambda value: None if value is None else inner(value)


def relay_decoder(schema: Any) -> Callable[[dict[str, Any]], dict[str, JsonValue]]:
    """A row as :func:`relay_columns` and ``to_json`` wrote it, parsed by :func:`parse` -> its payload, as
    ``row_encoder(schema)`` makes it of the same row (``schema``: the query's result schema)."""
    fields = [(field.name, decoder(field.dataType)) for field in schema.fields]
    return lambda row: {name: decode(row.get(name)) for name, decode in fields}


def parse(text: str | bytes) -> Any:
    """``to_json``'s text, decimals (and doubles) kept as their exact digits until decoded."""
    return json.loads(text, parse_float=Decimal)
