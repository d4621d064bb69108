"""Reads a stream's replay log from asyncio (the gateway): the sync reader's queries and parsing, awaited;
and follows it as entries are committed (``follow``: a blocking XREAD). The Redis ``port.StreamLog``."""

from __future__ import annotations

import secrets
from typing import Any, cast

import redis.asyncio as redis_async

from sparkwire.replaylog.keys import StreamKeys
from sparkwire.replaylog.model import Entry, History, Snapshot, StreamMeta
from sparkwire.replaylog.reader import (
    HISTORY_META_FIELDS,
    SNAPSHOT_META_FIELDS,
    entry_id,
    parse_entry,
    parse_history,
    parse_meta,
    parse_range,
    parse_snapshot,
    range_after,
)
from sparkwire.replaylog.scripts import script_source

_DECLARE_REWIND_SOURCE = script_source("declare_rewind.lua")


class AsyncReplayLogReader:
    def __init__(self, client: redis_async.Redis, keys: StreamKeys) -> None:
        self.client = client
        self.keys = keys
        self._declare_rewind = client.register_script(_DECLARE_REWIND_SOURCE)

    async def meta(self) -> StreamMeta:
        return parse_meta(await self.client.hgetall(self.keys.meta))

    async def follow(self, after_seq: int, count: int, block_ms: int) -> list[Entry]:
        """Up to ``count`` entries after ``after_seq``, waiting up to ``block_ms`` for one (XREAD BLOCK)."""
        response = await self.client.xread({self.keys.log: entry_id(after_seq)}, count=count, block=block_ms)
        return [parse_entry(raw_id, fields) for raw_id, fields in _xread_entries(response)] if response else []

    async def follow_after(self, seq: int, count: int, block_ms: int) -> tuple[Entry | None, list[Entry]]:
        """The entry at ``seq`` (XRANGE) and ``follow(seq, …)`` in one pipeline: one connection, one node. A
        connection a failover replaced is retried whole (redis-py resends the pipeline), so both come from
        the node that answers the XREAD."""
        async with self.client.pipeline(transaction=False) as pipe:
            pipe.xrange(self.keys.log, min=entry_id(seq), max=entry_id(seq), count=1)
            pipe.xread({self.keys.log: entry_id(seq)}, count=count, block=block_ms)
            held_raw, response = await pipe.execute()
        held = parse_range(held_raw)
        entries = [parse_entry(raw_id, fields) for raw_id, fields in _xread_entries(response)] if response else []
        return (held[0] if held else None), entries

    async def read_after(self, seq: int, count: int) -> list[Entry]:
        """Up to ``count`` entries with a seq greater than ``seq``, in order."""
        return parse_range(await self.client.xrange(self.keys.log, min=range_after(seq), max="+", count=count))

    async def snapshot(self) -> Snapshot:
        """State and the seq it reflects, in one MULTI/EXEC (see ReplayLogReader.snapshot)."""
        async with self.client.pipeline(transaction=True) as pipe:
            pipe.hgetall(self.keys.state)
            pipe.hmget(self.keys.meta, SNAPSHOT_META_FIELDS)
            pipe.xrevrange(self.keys.log, max="+", min="-", count=1)
            state_raw, (epoch, last_seq), head = await pipe.execute()
        return parse_snapshot(state_raw, epoch, last_seq, head)

    async def history(self, last: int) -> History:
        """The last ``last`` entries and the state they end at, in one MULTI/EXEC (see
        ReplayLogReader.history)."""
        if last < 0:
            raise ValueError(f"last must be at least 0, got {last}")
        async with self.client.pipeline(transaction=True) as pipe:
            if last:
                pipe.xrevrange(self.keys.log, max="+", min="-", count=last)
            pipe.hgetall(self.keys.state)
            pipe.hmget(self.keys.meta, HISTORY_META_FIELDS)
            replies = await pipe.execute()
        return parse_history(replies[0] if last else [], replies[-2], replies[-1])

    async def descriptor(self) -> str | None:
        """The stream's descriptor (JSON text) as its writer stored it; None when it wrote none."""
        raw = await self.client.get(self.keys.descriptor)
        return None if raw is None else (raw.decode() if isinstance(raw, bytes) else str(raw))


    async def declare_rewind(self, epoch: str, seq: int, digest: str) -> tuple[str, str]:
        """A new epoch if the log confirms the rewind (``lua/declare_rewind.lua``: one call, so gateways seeing
        it together declare one epoch). A retry after a lost reply finds the epoch moved and changes nothing."""
        status, now = await self._declare_rewind(keys=[self.keys.log, self.keys.meta],
                                                 args=[epoch, seq, digest, secrets.token_hex(8)])
        return _text(status), _text(now)


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


def _xread_entries(response: Any) -> list[tuple[bytes, dict[bytes, bytes]]]:
    """The entries of a one-stream XREAD reply, RESP2 (list of [key, entries]) or RESP3 (map)."""
    per_stream = response.values() if isinstance(response, dict) else [entries for _, entries in response]
    return [entry for entries in per_stream for entry in cast("list[tuple[bytes, dict[bytes, bytes]]]", entries)]
