"""One reader per pod per stream: a blocking XREAD loop that feeds a ring of recent entries and fans
each batch out to the connections, every entry encoded once for all of them."""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from typing import Any, cast

import redis.asyncio as redis_async
from redis.exceptions import RedisError

from sparkwire.gateway import metrics
from sparkwire.gateway.subscription import EndReason, LiveBatch, LiveEntry, Subscription
from sparkwire.protocol.server_frames import encode_entry
from sparkwire.replaylog.async_reader import AsyncReplayLogReader
from sparkwire.replaylog.keys import StreamKeys
from sparkwire.replaylog.model import Entry, StreamMeta
from sparkwire.replaylog.reader import entry_id, parse_entry

log = logging.getLogger(__name__)


class StreamHub:
    def __init__(self, client: redis_async.Redis, keys: StreamKeys, *, ring_size: int, block_ms: int = 1000,
                 queue_size: int = 256) -> None:
        self.client = client
        self.keys = keys
        self.log = AsyncReplayLogReader(client, keys)  # what connections read history and snapshots with
        self.ring: deque[LiveEntry] = deque(maxlen=ring_size)
        self.block_ms = block_ms
        self.queue_size = queue_size
        self.subscriptions: set[Subscription] = set()
        self.epoch = ""
        self.head_seq = 0
        self.healthy = False
        self.started = asyncio.Event()
        self._written_through = metrics.WRITTEN_THROUGH.labels(stream=keys.stream)
        self._delivered = metrics.ENTRIES_DELIVERED.labels(stream=keys.stream)

    @property
    def stream(self) -> str:
        return self.keys.stream

    def subscribe(self) -> Subscription:
        subscription = Subscription(self.queue_size)
        self.subscriptions.add(subscription)
        return subscription

    def end_all(self, reason: EndReason) -> None:
        for subscription in self.subscriptions:
            subscription.end(reason)

    def unsubscribe(self, subscription: Subscription) -> None:
        self.subscriptions.discard(subscription)

    def ring_after(self, seq: int, limit: int) -> list[LiveEntry] | None:
        """Up to ``limit`` ring entries after ``seq``, or None when the ring does not start at ``seq + 1``
        or earlier (the caller must read Redis)."""
        if not self.ring or self.ring[0].entry.seq > seq + 1:
            return None
        start = seq + 1 - self.ring[0].entry.seq
        return [self.ring[i] for i in range(max(start, 0), min(len(self.ring), max(start, 0) + limit))]

    async def meta(self) -> StreamMeta:
        return await self.log.meta()

    async def run(self) -> None:
        backoff = 0.05
        while True:
            try:
                await self._follow()
            except asyncio.CancelledError:
                raise
            except (RedisError, OSError) as error:
                self.healthy = False
                metrics.REDIS_ERRORS.labels(operation="xread").inc()
                log.warning("hub lost redis", extra={"fields": {"stream": self.stream, "error": str(error)}})
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 2.0)
            else:
                backoff = 0.05

    async def _follow(self) -> None:
        meta = await self.meta()
        if meta.epoch != self.epoch and (self.epoch or not self.started.is_set()):
            self._reset(meta)
        self.healthy = True
        self.started.set()
        while True:
            response = await self.client.xread({self.keys.log: entry_id(self.head_seq)}, count=1000,
                                               block=self.block_ms)
            if not response:
                meta = await self.meta()  # quiet: a good moment to notice a lost log (new epoch)
                metrics.SINK_DUPLICATES.labels(stream=self.stream).set(
                    meta.counters.get("duplicates_suppressed", 0))
                if (self.epoch and meta.epoch != self.epoch) or meta.last_seq < self.head_seq:
                    self._reset(meta)
                continue
            if not self.epoch:  # the first commit to an empty stream created its epoch just now
                self.epoch = (await self.meta()).epoch
            self._publish([parse_entry(entry_id_raw, fields) for entry_id_raw, fields in _xread_entries(response)])

    def _publish(self, entries: list[Entry]) -> None:
        batch = LiveBatch()
        for entry in entries:
            if entry.seq != self.head_seq + 1:
                metrics.GAPS_DETECTED.labels(stream=self.stream).inc()
                log.warning("hub saw a seq hole", extra={"fields": {"stream": self.stream, "head": self.head_seq,
                                                                    "got": entry.seq}})
            try:
                batch.append(LiveEntry(entry, encode_entry(entry)))
            except ValueError:
                log.exception("entry with invalid data skipped by the hub")
                continue
            self.head_seq = entry.seq
        self.ring.extend(batch)
        metrics.HEAD_SEQ.labels(stream=self.stream).set(self.head_seq)
        written_through = 0
        for subscription in list(self.subscriptions):
            written_through += subscription.offer(batch)
        if written_through and batch:
            # Once per batch, not per connection: at thousands of clients the metric calls cost more than
            # the writes. The latency is that of the batch's last write through, the slowest.
            self._written_through.inc(written_through)
            self._delivered.inc(written_through * len(batch))
            metrics.DELIVERY_LATENCY.observe(max(time.time() * 1000 - batch[0].entry.commit_ms, 0) / 1000)

    def _reset(self, meta: StreamMeta) -> None:
        """The log this pod followed is gone (new epoch): connections must start over from a snapshot."""
        if self.epoch:
            log.warning("stream epoch changed", extra={"fields": {"stream": self.stream, "old": self.epoch,
                                                                  "new": meta.epoch}})
            self.end_all("stream_reset")
        self.epoch = meta.epoch
        self.head_seq = meta.last_seq
        self.ring.clear()


def _xread_entries(response: Any) -> list[tuple[bytes, dict[bytes, bytes]]]:
    """The entries of a one-stream XREAD reply, RESP2 (list of [key, entries]) or RESP3 (map)."""
    per_stream = response.values() if isinstance(response, dict) else [entries for _, entries in response]
    return [entry for entries in per_stream for entry in cast("list[tuple[bytes, dict[bytes, bytes]]]", entries)]

