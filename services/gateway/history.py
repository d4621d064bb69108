"""Async reads of the replay log for a connection: pages of history and atomic snapshots."""

from __future__ import annotations

from typing import cast

import redis.asyncio as redis_async

from sparkwire.replaylog.keys import StreamKeys
from sparkwire.replaylog.model import Entry, Snapshot
from sparkwire.replaylog.reader import entry_id, parse_entry, parse_state


async def read_after(client: redis_async.Redis, keys: StreamKeys, seq: int, count: int) -> list[Entry]:
    raw = cast(
        "list[tuple[bytes, dict[bytes, bytes]]]",
        await client.xrange(keys.log, min=f"({entry_id(seq)}", max="+", count=count),
    )
    return [parse_entry(entry_id_raw, fields) for entry_id_raw, fields in raw]


async def read_snapshot(client: redis_async.Redis, keys: StreamKeys) -> Snapshot:
    """State and the seq it reflects, in one MULTI/EXEC (see ReplayLogReader.snapshot)."""
    async with client.pipeline(transaction=True) as pipe:
        pipe.hgetall(keys.state)
        pipe.hmget(keys.meta, ["epoch", "last_seq"])
        state_raw, (epoch, last_seq) = await pipe.execute()
    return Snapshot(
        epoch=epoch.decode() if isinstance(epoch, bytes) else "",
        seq=int(last_seq) if last_seq is not None else 0,
        items=parse_state(state_raw),
    )
