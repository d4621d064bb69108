"""The log port in memory (``port.LogBackend``): a gateway driven in process by tests, with no Redis.

``MemoryStreamLog.commit`` plays the writer: it appends entries with the next seqs and moves the state in
one step, as the commit script does, so readers never see half a batch. ``new_epoch`` and ``trim`` stand in
for a lost log and for retention. Not for production: one process, nothing persisted.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import Sequence

from sparkwire.replaylog.model import Entry, History, Record, Snapshot, StateItem, StreamMeta
from sparkwire.replaylog.port import AckRecord, ConnectRecord, SessionLookup, SessionPosition
from sparkwire.replaylog.replication import ReplicationStatus


class MemoryStreamLog:
    def __init__(self) -> None:
        self.entries: list[Entry] = []  # consecutive seqs, oldest first
        self.items: dict[str, StateItem] = {}
        self.epoch = ""
        self.first_seq = 1
        self.last_seq = 0
        self.last_batch = -1
        self.stored_descriptor: str | None = None
        self._committed = asyncio.Condition()

    # -- the writer's side ------------------------------------------------------------------------------

    async def commit(self, records: Sequence[Record], batch_id: int | None = None) -> list[Entry]:
        """Append ``records`` as the next entries (creating the epoch on the first commit) and wake followers."""
        now_ms = int(time.time() * 1000)
        batch = self.last_batch + 1 if batch_id is None else batch_id
        self.epoch = self.epoch or uuid.uuid4().hex
        added = []
        for record in records:
            self.last_seq += 1
            entry = Entry(self.last_seq, record.processing_id, record.key, record.payload, now_ms, batch)
            self.entries.append(entry)
            self.items[record.key] = StateItem(entry.seq, entry.processing_id, json.loads(record.payload))
            added.append(entry)
        self.last_batch = batch
        async with self._committed:
            self._committed.notify_all()
        return added

    def new_epoch(self) -> str:
        """The log lost and started over (another epoch, seqs from 1), as after a rebuild."""
        self.entries, self.items = [], {}
        self.epoch, self.first_seq, self.last_seq, self.last_batch = uuid.uuid4().hex, 1, 0, -1
        return self.epoch

    def rewind(self, last_seq: int) -> None:
        """A failover to a replica that lacked the entries after ``last_seq``: gone, in the same epoch (the
        state keeps what it had, as a replica's would not: tests only read entries and seqs after this)."""
        self.entries = [entry for entry in self.entries if entry.seq <= last_seq]
        self.last_seq = last_seq
        self.last_batch = self.entries[-1].batch_id if self.entries else -1

    def trim(self, first_seq: int) -> None:
        """Retention: the entries before ``first_seq`` are gone (the state keeps their keys)."""
        self.entries = [entry for entry in self.entries if entry.seq >= first_seq]
        self.first_seq = first_seq

    # -- port.StreamLog ------------------------------------------------------------------------------

    async def meta(self) -> StreamMeta:
        return StreamMeta(epoch=self.epoch, first_seq=self.first_seq, last_seq=self.last_seq,
                          last_batch=self.last_batch, last_chunk=0 if self.epoch else -1, query_id="memory",
                          created_ms=0, last_commit_ms=self.entries[-1].commit_ms if self.entries else 0)

    async def follow(self, after_seq: int, count: int, block_ms: int) -> list[Entry]:
        if self.last_seq <= after_seq:
            async with self._committed:
                try:
                    await asyncio.wait_for(self._committed.wait_for(lambda: self.last_seq > after_seq),
                                           block_ms / 1000)
                except TimeoutError:
                    return []
        return await self.read_after(after_seq, count)

    async def follow_after(self, seq: int, count: int, block_ms: int) -> tuple[Entry | None, list[Entry]]:
        held = [entry for entry in self.entries if entry.seq == seq]
        return (held[0] if held else None), await self.follow(seq, count, block_ms)

    async def read_after(self, seq: int, count: int) -> list[Entry]:
        start = max(seq + 1 - self.first_seq, 0)
        return self.entries[start : start + count]

    async def snapshot(self) -> Snapshot:
        head = self.entries[-1] if self.entries and self.entries[-1].seq == self.last_seq else None
        return Snapshot(self.epoch, self.last_seq, dict(self.items), head.digest if head else None)

    async def history(self, last: int) -> History:
        if last < 0:
            raise ValueError(f"last must be at least 0, got {last}")
        entries = self.entries[-last:] if last else []
        return History(self.epoch, self.last_seq, self.first_seq, list(entries), dict(self.items))

    async def descriptor(self) -> str | None:
        return self.stored_descriptor

    async def declare_rewind(self, epoch: str, seq: int, digest: str) -> tuple[str, str]:
        if epoch != self.epoch:
            return "moved", self.epoch
        held = [entry for entry in self.entries if entry.seq == seq]
        if self.last_seq >= seq and (not digest or not held or held[0].digest == digest):
            return "intact", self.epoch
        self.epoch = uuid.uuid4().hex
        return "declared", self.epoch


class MemorySessionRecords:
    def __init__(self) -> None:
        # (session, stream) -> the hash a Redis store would hold
        self.hashes: dict[tuple[str, str], dict[str, object]] = {}

    async def lookup(self, sessions: Sequence[tuple[str, str]]) -> list[SessionLookup]:
        return [self._lookup(key) for key in sessions]

    def _lookup(self, key: tuple[str, str]) -> SessionLookup:
        stored = self.hashes.get(key)
        if stored is None or "subject" not in stored:
            return None, None
        position = stored.get("position")
        return str(stored["subject"]), position if isinstance(position, SessionPosition) else None

    async def connected(self, records: Sequence[ConnectRecord], *, pod: str, ttl_seconds: int) -> None:
        for record in records:
            self.hashes.setdefault((record.session_id, record.stream), {}).update(
                pod=pod, subject=record.subject, connected_ms=record.connected_ms)

    async def write(self, acks: Sequence[AckRecord], *, pod: str, ttl_seconds: int) -> None:
        for ack in acks:
            self.hashes.setdefault((ack.session_id, ack.stream), {}).update(
                position=ack.position, pod=pod, subject=ack.subject, updated_ms=ack.updated_ms)


class MemoryBackend:
    def __init__(self) -> None:
        self.streams: dict[str, MemoryStreamLog] = {}
        self._sessions = MemorySessionRecords()

    def stream(self, name: str) -> MemoryStreamLog:
        return self.streams.setdefault(name, MemoryStreamLog())

    @property
    def sessions(self) -> MemorySessionRecords:
        return self._sessions

    async def ping(self) -> None:
        return None

    async def replication(self) -> ReplicationStatus:
        return ReplicationStatus(role="master", master_replid="memory", master_repl_offset=0, replicas=())

    async def close(self) -> None:
        return None
