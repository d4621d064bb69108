"""What a delivered query's results are (:class:`StreamSpec`) and the descriptor clients read of it.

The descriptor is a JSON document stored beside the stream's log (``{prefix}:{<stream>}:descriptor``,
``GET /descriptor?stream=`` on a gateway): how to draw the stream without knowing the query that made it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sparkwire.replaylog.keys import STREAM_NAME
from sparkwire.spark.types import OUTPUT_MODES, JsonValue, OutputMode

DESCRIPTOR_VERSION = 1
ID_FIELD = "processingId"
REVISION_FIELD = "revision"
RESULT_ID_FIELD = "resultId"
_NUMERIC = {"byte", "short", "integer", "long", "float", "double", "decimal"}
# What a window bound may be: a timestamp, or epoch milliseconds (the rebuild turns both into ms).
_WINDOW_BOUND = {"timestamp", "timestamp_ntz", "byte", "short", "integer", "long"}
WINDOW_FORMS = ("window= takes Spark's window struct column by name (window=\"window\", what "
                "groupBy(F.window(...)) gives: fields start and end) or a pair of columns (window=(\"windowStart\", "
                "\"windowEnd\")), each a timestamp or epoch milliseconds")


class DeliveryError(ValueError):
    """What was asked cannot be delivered exactly once; raised before anything is written."""


def _names(value: str | Sequence[str]) -> tuple[str, ...]:
    return (value,) if isinstance(value, str) else tuple(value)


@dataclass(frozen=True)
class StreamSpec:
    """How the rows of a result DataFrame become entries of the stream ``stream``.

    ``key``: the column(s) naming what a row is a result *of* (a metric, a region): the stream's state keeps
    the latest entry per key, a page draws a card per key. ``id_column`` names a column holding each result's
    deterministic processingId; otherwise ``id_from`` names the columns it is derived from (sha1 of their
    encoded values; the window and the key, typically). ``mode``: ``append`` delivers each final result once;
    ``update`` delivers every revision of a result (its value after each micro-batch that changed it).
    ``event_time``: the result column of its time (the page's x axis); ``window``: the result's window, which
    the rebuild needs: Spark's window struct column by name (``"window"``: a struct of ``start`` and ``end``, as
    ``groupBy(F.window(...))`` gives it) or the columns of its start and end (``("windowStart", "windowEnd")``);
    ``value_fields``: what to plot (default: every numeric column that is not key, id, time or window).
    """

    stream: str
    key: str | Sequence[str]
    mode: OutputMode = "append"
    id_column: str | None = None
    id_from: Sequence[str] = ()
    event_time: str | None = None
    window: str | tuple[str, str] | None = None
    value_fields: Sequence[str] | None = None
    title: str = ""
    units: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not STREAM_NAME.match(self.stream):
            raise DeliveryError(
                f"stream name {self.stream!r} must be 1-64 characters of letters, digits, '_', '.', '-'")
        if self.mode not in OUTPUT_MODES:
            raise DeliveryError(
                f"output mode {self.mode!r} is not supported: 'append' (each final result once) or 'update' "
                "(every revision once); 'complete' re-emits every result each batch, which has no exactly-once "
                "meaning for a log")
        if not self.keys:
            raise DeliveryError("key must name at least one column")
        if isinstance(self.window, (list, tuple)):
            object.__setattr__(self, "window", tuple(self.window))  # a list from a config file, made hashable
        if self.window is not None and not (
                (isinstance(self.window, str) and self.window)
                or (len(self.window) == 2 and all(isinstance(name, str) and name for name in self.window))):
            raise DeliveryError(f"window={self.window!r}: {WINDOW_FORMS}")
        if (self.id_column is None) == (not self.id_from):
            raise DeliveryError("give exactly one of id_column (a column holding a deterministic processingId) "
                                "and id_from (the columns it is derived from)")

    @property
    def keys(self) -> tuple[str, ...]:
        return _names(self.key)

    @property
    def id_columns(self) -> tuple[str, ...]:
        """The columns a result's identity depends on."""
        return (self.id_column,) if self.id_column else tuple(self.id_from)

    @property
    def window_columns(self) -> tuple[str, ...]:
        """The result columns the window is made of: the struct, or the start and end columns."""
        if self.window is None:
            return ()
        return (self.window,) if isinstance(self.window, str) else tuple(self.window)

    @property
    def window_bounds(self) -> tuple[tuple[str, ...], tuple[str, ...]] | None:
        """The window's start and end, each as a path of field names: ``("window", "start")`` in a struct,
        ``("windowStart",)`` for a column."""
        if self.window is None:
            return None
        if isinstance(self.window, str):
            return (self.window, "start"), (self.window, "end")
        start, end = self.window
        return (start,), (end,)

    def _check_window(self, schema: Any) -> None:
        """The window is a struct of start and end, or two columns, each a timestamp or epoch ms: anything
        else would give the rebuild wrong window bounds, so it is refused before the query starts."""
        if self.window is None:
            return
        from pyspark.sql import types as T

        fields = {f.name: f.dataType for f in schema.fields}
        if isinstance(self.window, str):
            data_type = fields[self.window]
            inner = {f.name: f.dataType for f in data_type.fields} if isinstance(data_type, T.StructType) else {}
            if "start" not in inner or "end" not in inner:
                raise DeliveryError(f"window={self.window!r} names a {data_type.simpleString()} column, not a "
                                    f"struct with fields start and end; {WINDOW_FORMS}")
            bounds = [(f"{self.window}.start", inner["start"]), (f"{self.window}.end", inner["end"])]
        else:
            bounds = [(name, fields[name]) for name in self.window]
        wrong = [f"{name} ({data_type.simpleString()})" for name, data_type in bounds
                 if data_type.typeName() not in _WINDOW_BOUND]
        if wrong:
            raise DeliveryError(f"the window's {', '.join(wrong)} is neither a timestamp nor epoch milliseconds: "
                                f"cast it; {WINDOW_FORMS}")

    def check_columns(self, schema: Any) -> None:
        """Every column named exists in ``schema``, an id column holds strings, the window is one the rebuild
        can read."""
        present = {f.name: f.dataType.typeName() for f in schema.fields}
        named = [*self.keys, *self.id_columns, *(self.value_fields or ()),
                 *([self.event_time] if self.event_time else []), *self.window_columns]
        missing = sorted({name for name in named if name not in present})
        dotted = [name for name in self.window_columns if name not in present and "." in name]
        if dotted and isinstance(self.window, tuple) and dotted[0].split(".")[0] in present:
            struct = dotted[0].split(".")[0]
            raise DeliveryError(f"window={self.window!r} names fields of the struct column {struct!r}: give the "
                                f"struct itself, window={struct!r}")
        if missing:
            raise DeliveryError(f"the result has no column {', '.join(map(repr, missing))} "
                                f"(it has {', '.join(present)})")
        if self.id_column and present[self.id_column] != "string":
            raise DeliveryError(
                f"id_column {self.id_column!r} must be a string column, it is {present[self.id_column]}")
        reserved = {REVISION_FIELD, RESULT_ID_FIELD} if self.mode == "update" else set()
        if self.id_column != ID_FIELD:
            reserved.add(ID_FIELD)
        clashing = sorted(reserved & set(present))
        if clashing:
            raise DeliveryError(f"result columns {clashing} clash with fields sparkwire adds to each payload")
        self._check_window(schema)

    def value_columns(self, schema: Any) -> list[str]:
        if self.value_fields is not None:
            return list(self.value_fields)
        skip = {*self.keys, *self.id_columns, self.event_time, *self.window_columns}
        return [f.name for f in schema.fields if f.name not in skip and f.dataType.typeName() in _NUMERIC]

    def descriptor(self, schema: Any, rebuild: str) -> dict[str, JsonValue]:
        """The stream's descriptor for a result of ``schema``; ``rebuild`` says whether and why not it can be
        rebuilt ("available" or the reason)."""
        return {
            "version": DESCRIPTOR_VERSION,
            "stream": self.stream,
            "title": self.title or self.stream,
            "mode": self.mode,
            "key": list(self.keys),
            "id": {"column": self.id_column} if self.id_column else {"from": list(self.id_from)},
            "eventTime": self.event_time,
            # Field names in the payload; a struct's as paths ("window.start"), as in Spark SQL.
            "window": [".".join(path) for path in self.window_bounds] if self.window_bounds else None,
            "valueFields": list(self.value_columns(schema)),
            "units": dict(self.units),
            "schema": json.loads(schema.json()),
            "revisions": self.mode == "update",
            "rebuild": rebuild,
        }
