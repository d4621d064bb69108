"""Reads a stream's replay log: meta, entries by seq, and atomic snapshots."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import cast

import redis

from sparkwire.replaylog.keys import LogField, MetaField, StreamKeys
from sparkwire.replaylog.model import Entry, History, Snapshot, StateItem, StreamMeta

_POSITION_FIELDS = frozenset(MetaField)


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


def entry_id(seq: int) -> str:
    """The stream entry id of a seq: ids are derived from seqs so ranges by seq are ranges by id."""
    return f"{seq}-0"


def parse_entry(entry_id_raw: bytes | str, fields: Mapping[bytes, bytes] | Mapping[str, str]) -> Entry:
    decoded = {_text(k): _text(v) for k, v in fields.items()}
    return Entry(
        seq=int(_text(entry_id_raw).split("-", 1)[0]),
        processing_id=decoded[LogField.PROCESSING_ID],
        key=decoded[LogField.KEY],
        data=decoded[LogField.DATA],
        commit_ms=int(decoded[LogField.COMMIT_MS]),
        batch_id=int(decoded[LogField.BATCH]),
    )


def parse_meta(raw: Mapping[bytes | str, bytes | str]) -> StreamMeta:
    decoded = {_text(k): _text(v) for k, v in raw.items()}

    def number(name: str, default: int) -> int:
        return int(decoded[name]) if name in decoded else default

    return StreamMeta(
        epoch=decoded.get(MetaField.EPOCH, ""),
        first_seq=number(MetaField.FIRST_SEQ, 1),
        last_seq=number(MetaField.LAST_SEQ, 0),
        last_batch=number(MetaField.LAST_BATCH, -1),
        last_chunk=number(MetaField.LAST_CHUNK, -1),
        query_id=decoded.get(MetaField.QUERY_ID, ""),
        created_ms=number(MetaField.CREATED_MS, 0),
        last_commit_ms=number(MetaField.LAST_COMMIT_MS, 0),
        counters={k: int(v) for k, v in decoded.items() if k not in _POSITION_FIELDS},
    )


def parse_state(raw: Mapping[bytes | str, bytes | str]) -> dict[str, StateItem]:
    items: dict[str, StateItem] = {}
    for key, value in raw.items():
        document = json.loads(value)
        items[_text(key)] = StateItem(
            seq=int(document["seq"]), processing_id=str(document["processingId"]), data=document["data"]
        )
    return items


def parse_range(raw: object) -> list[Entry]:
    """An XRANGE reply as entries (sync and async clients alike)."""
    entries = cast("list[tuple[bytes, dict[bytes, bytes]]]", raw)
    return [parse_entry(entry_id_raw, fields) for entry_id_raw, fields in entries]


def range_after(seq: int) -> str:
    """XRANGE ``min`` for "every entry with a seq greater than ``seq``"."""
    return f"({entry_id(seq)}"


SNAPSHOT_META_FIELDS = [MetaField.EPOCH, MetaField.LAST_SEQ]


def parse_snapshot(state_raw: Mapping[bytes | str, bytes | str], epoch: bytes | str | None,
                   last_seq: bytes | str | None, head_range: object = ()) -> Snapshot:
    """A snapshot from ``HGETALL state``, ``HMGET meta epoch last_seq`` and ``XREVRANGE log + - COUNT 1`` read
    in one MULTI/EXEC; its digest is that of the entry at its seq (None when the log does not hold it)."""
    seq = int(last_seq) if last_seq is not None else 0
    head = parse_range(head_range)
    return Snapshot(
        epoch=_text(epoch) if epoch is not None else "",
        seq=seq,
        items=parse_state(state_raw),
        digest=head[0].digest if head and head[0].seq == seq else None,
    )


HISTORY_META_FIELDS = [MetaField.EPOCH, MetaField.LAST_SEQ, MetaField.FIRST_SEQ]


def parse_history(reversed_range: object, state_raw: Mapping[bytes | str, bytes | str],
                  meta_values: list[bytes | str | None]) -> History:
    """A history from ``XREVRANGE log + - COUNT n``, ``HGETALL state`` and ``HMGET meta epoch last_seq
    first_seq`` read in one MULTI/EXEC (``ReplayLogReader.history``)."""
    epoch, last_seq, first_seq = meta_values
    entries = parse_range(reversed_range)
    entries.reverse()
    return History(
        epoch=_text(epoch) if epoch is not None else "",
        seq=int(last_seq) if last_seq is not None else 0,
        first_seq=int(first_seq) if first_seq is not None else 1,
        entries=entries,
        items=parse_state(state_raw),
    )


class ReplayLogReader:
    def __init__(self, client: redis.Redis, stream: str, *, prefix: str | None = None) -> None:
        self.client = client
        self.keys = StreamKeys(stream) if prefix is None else StreamKeys(stream, prefix)

    def meta(self) -> StreamMeta:
        return parse_meta(self.client.hgetall(self.keys.meta))

    def descriptor(self) -> str | None:
        """The stream's descriptor (JSON text) as its writer stored it; None when it wrote none."""
        raw = self.client.get(self.keys.descriptor)
        return None if raw is None else (raw.decode() if isinstance(raw, bytes) else str(raw))

    def read_after(self, seq: int, count: int = 1000) -> list[Entry]:
        """Up to ``count`` entries with a seq greater than ``seq``, in order."""
        return parse_range(self.client.xrange(self.keys.log, min=range_after(seq), max="+", count=count))

    def iter_all(self, page: int = 1000) -> Iterator[Entry]:
        seq = 0
        while True:
            entries = self.read_after(seq, page)
            if not entries:
                return
            yield from entries
            seq = entries[-1].seq

    def snapshot(self) -> Snapshot:
        """State hash and meta read in one MULTI/EXEC, so ``seq`` is exactly what the state reflects."""
        pipe = self.client.pipeline(transaction=True)
        pipe.hgetall(self.keys.state)
        pipe.hmget(self.keys.meta, SNAPSHOT_META_FIELDS)
        pipe.xrevrange(self.keys.log, max="+", min="-", count=1)
        state_raw, (epoch, last_seq), head = pipe.execute()
        return parse_snapshot(state_raw, epoch, last_seq, head)

    def history(self, last: int) -> History:
        """The last ``last`` entries (fewer if the log holds fewer) and the state, with the meta, in one
        MULTI/EXEC: the entries end exactly at the ``seq`` the state reflects (the commit script moves the
        log, the state and ``last_seq`` in one call), so nothing is missing or repeated after them."""
        if last < 0:
            raise ValueError(f"last must be at least 0, got {last}")
        pipe = self.client.pipeline(transaction=True)
        if last:
            pipe.xrevrange(self.keys.log, max="+", min="-", count=last)
        pipe.hgetall(self.keys.state)
        pipe.hmget(self.keys.meta, HISTORY_META_FIELDS)
        replies = pipe.execute()
        return parse_history(replies[0] if last else [], replies[-2], replies[-1])
