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
    ``event_time``: the result column of its time (the page's x axis); ``window``: the result columns of a
    window's start and end, which the rebuild of an append-mode stream needs; ``value_fields``: what to plot
    (default: every numeric column that is not key, id, time or window).
    """

    stream: str
    key: str | Sequence[str]
    mode: OutputMode = "append"
    id_column: str | None = None
    id_from: Sequence[str] = ()
    event_time: str | None = None
    window: tuple[str, str] | None = None
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

    def check_columns(self, schema: Any) -> None:
        """Every column named exists in ``schema``, and an id column holds strings."""
        present = {f.name: f.dataType.typeName() for f in schema.fields}
        named = [*self.keys, *self.id_columns, *(self.value_fields or ()),
                 *([self.event_time] if self.event_time else []), *(self.window or ())]
        missing = sorted({name for name in named if name not in present})
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

    def value_columns(self, schema: Any) -> list[str]:
        if self.value_fields is not None:
            return list(self.value_fields)
        skip = {*self.keys, *self.id_columns, self.event_time, *(self.window or ())}
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
            "window": list(self.window) if self.window else None,
            "valueFields": list(self.value_columns(schema)),
            "units": dict(self.units),
            "schema": json.loads(schema.json()),
            "revisions": self.mode == "update",
            "rebuild": rebuild,
        }
