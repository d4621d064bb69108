"""One micro-batch of result rows -> the records the replay log commits (pure once the rows are collected).

* The payload is the row encoded by ``encoding.py``, plus ``processingId`` (the result's id) and, in update
  mode, ``revision`` (the id of the micro-batch that produced this value of the result).
* The record's processingId — what the log and the clients deduplicate by — is the result's id in append
  mode, and ``<id>@<revision>`` in update mode: every revision is an entry of its own, delivered once.
* Null is a value, as it is to Spark's grouping: a row whose key or ``id_from`` columns are partly null is a
  result, with null encoded in its key and id (:func:`key_text`, :func:`derive_id`) apart from any string.
  Only a row whose key columns are *all* null is no result (the metrics job's heartbeat windows): it is
  skipped and counted, never committed. A null ``id_column`` on a result is an error (there is no id to
  deliver it once by), raised as :class:`~sparkwire.spark.stream.DeliveryError`.
* Records are ordered by event time, key and id, the same on every run of the batch, so a key's newest
  result is its last entry of the batch (and the state's entry for the key).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from sparkwire.replaylog import Record
from sparkwire.spark.results.encoding import check_encodable, row_encoder
from sparkwire.spark.stream import ID_FIELD, REVISION_FIELD, DeliveryError, StreamSpec
from sparkwire.spark.types import JsonValue


def _canonical(value: JsonValue) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def derive_id(values: list[JsonValue]) -> str:
    """The processingId of a result identified by the encoded ``values`` of its ``id_from`` columns: sha1 of
    their JSON array, where a null is ``null`` and a string is quoted, so null, "null", "None" and "" give
    four ids."""
    return hashlib.sha1(_canonical(values).encode()).hexdigest()


def key_text(values: list[JsonValue]) -> str:
    """The state key: a single string column as it is, otherwise the values (strings as they are, others as
    JSON) joined by '/'; a key with a null among its values is their JSON array with '/' escaped.

    The null form cannot be mistaken for a key without nulls: that one has at least one '/' (the key has
    two or more columns: a single column's null is an all-null key, never delivered), the null form none.
    Keys without nulls keep the form they always had, so a running stream's state keys do not change."""
    if len(values) == 1 and isinstance(values[0], str):
        return values[0]
    if any(value is None for value in values):
        return _canonical(values).replace("/", "\\u002f")
    return "/".join(value if isinstance(value, str) else _canonical(value) for value in values)


def _order(value: JsonValue) -> tuple[int, Any]:
    return (0, 0) if value is None else (1, value)


def _ordering_time(spec: StreamSpec) -> Callable[[dict[str, JsonValue]], JsonValue]:
    """A payload's time, which orders a batch's records: the event time column; without one, the end of a
    window struct column, which no top-level column can name (so that a key's newest window is still its
    last entry of the batch, and the state's). A pair of window columns leaves the order as it was: such a
    stream can name its end as ``event_time``, and a running stream's batches keep the order they had."""
    if spec.event_time:
        column = spec.event_time
        return lambda payload: payload[column]
    if isinstance(spec.window, str):
        struct = spec.window

        def window_end(payload: dict[str, JsonValue]) -> JsonValue:
            window = payload[struct]
            return window.get("end") if isinstance(window, dict) else None
        return window_end
    return lambda payload: None


@dataclass
class EncodedBatch:
    records: list[Record]
    skipped: int
    """Rows whose key columns are all null (no result), not committed."""


class ResultEncoder:
    """Turns collected rows of one result schema into records; checks the schema once, up front."""

    def __init__(self, spec: StreamSpec, schema: Any) -> None:
        check_encodable(schema)
        spec.check_columns(schema)
        self.spec = spec
        self._encode = row_encoder(schema)
        self._time = _ordering_time(spec)

    def encode(self, rows: Iterable[Any], revision: int) -> EncodedBatch:
        spec = self.spec
        ordered: list[tuple[tuple[Any, ...], Record]] = []
        skipped = 0
        for row in rows:
            payload = self._encode(row)
            keys = [payload[name] for name in spec.keys]
            ids = [payload[name] for name in spec.id_columns]
            if all(value is None for value in keys):
                skipped += 1
                continue
            if spec.id_column and ids[0] is None:
                raise DeliveryError(
                    f"stream {spec.stream}: a result of key {key_text(keys)!r} has a null id_column "
                    f"{spec.id_column!r}, so it cannot be delivered exactly once; make the column non-null for "
                    "every result (e.g. coalesce it), or give id_from=(columns) instead: a derived id encodes "
                    "nulls")
            result_id = str(ids[0]) if spec.id_column else derive_id(ids)
            payload[ID_FIELD] = result_id
            record_id = result_id
            if spec.mode == "update":
                payload[REVISION_FIELD] = revision
                record_id = f"{result_id}@{revision}"
            key = key_text(keys)
            when = self._time(payload)
            record = Record(processing_id=record_id, key=key, payload=_canonical(payload))
            ordered.append(((_order(when), key, record_id), record))
        ordered.sort(key=lambda item: item[0])
        return EncodedBatch([record for _, record in ordered], skipped)
