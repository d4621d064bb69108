"""Async reads of the replay log for a connection: pages of history and atomic snapshots.

The parsing is ``sparkwire.replaylog.reader``'s; only the I/O differs from the sync reader.
"""

from __future__ import annotations

import redis.asyncio as redis_async

from sparkwire.replaylog.keys import StreamKeys
from sparkwire.replaylog.model import Entry, Snapshot
from sparkwire.replaylog.reader import SNAPSHOT_META_FIELDS, parse_range, parse_snapshot, range_after


async def read_after(client: redis_async.Redis, keys: StreamKeys, seq: int, count: int) -> list[Entry]:
    return parse_range(await client.xrange(keys.log, min=range_after(seq), max="+", count=count))


async def read_snapshot(client: redis_async.Redis, keys: StreamKeys) -> Snapshot:
    """State and the seq it reflects, in one MULTI/EXEC (see ReplayLogReader.snapshot)."""
    async with client.pipeline(transaction=True) as pipe:
        pipe.hgetall(keys.state)
        pipe.hmget(keys.meta, SNAPSHOT_META_FIELDS)
        state_raw, (epoch, last_seq) = await pipe.execute()
    return parse_snapshot(state_raw, epoch, last_seq)
