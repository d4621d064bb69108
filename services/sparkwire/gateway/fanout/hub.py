"""One reader per pod per stream: a loop following the log (``StreamLog.follow``: a blocking XREAD on Redis)
that feeds a ring of recent entries and fans each batch out to the connections, every entry encoded once for
all of them."""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Callable, Sequence

from sparkwire.gateway import metrics
from sparkwire.gateway.fanout.subscription import EndReason, LiveBatch, LiveEntry, Subscription
from sparkwire.gateway.fanout.sweep import Sweep
from sparkwire.gateway.fanout.views import StreamViews
from sparkwire.gateway.recovery.continuity import head_verdict
from sparkwire.gateway.store.batched import Batched, shared
from sparkwire.gateway.transport.contract import serialize_text_frames
from sparkwire.protocol.scope import View
from sparkwire.protocol.server_frames import EncodedEntry, encode_entry, encode_snapshot, pack_entries
from sparkwire.replaylog.model import Entry, Snapshot, StreamMeta
from sparkwire.replaylog.port import UNAVAILABLE, StreamLog

log = logging.getLogger(__name__)

# How long the log may end before the last entry this pod read, in the same epoch, before that is a rewind: a
# failover to a replica that held the batch staged but not published gets it published again, identically, by
# the writer within seconds (the same reason as the handshake's CURSOR_AHEAD_WAIT_S, the same length).
LOG_BEHIND_WAIT_S = 8.0


MAX_VIEW_ENCODINGS = 256

# Replayed runs kept encoded (``replay_frames``): clients that resume together (a pod lost: its clients all
# at the same seq, back within a second) ask for a handful of runs between them, one per head they see.
MAX_REPLAY_ENCODINGS = 64


class EncodedSnapshot:
    """A snapshot and its frames, encoded once per frame size for every connection that shares it."""

    __slots__ = ("_frames", "_view_frames", "snapshot")

    def __init__(self, snapshot: Snapshot) -> None:
        self.snapshot = snapshot
        self._frames: dict[int, list[str]] = {}
        self._view_frames: dict[tuple[str, int], list[str]] = {}

    def view_frames(self, views: StreamViews, view: View, max_frame_bytes: int) -> list[str]:
        """The frames of the snapshot filtered by ``view``: once per view for every connection of it."""
        frames = self._view_frames.get((view.id, max_frame_bytes))
        if frames is None:
            frames = views.snapshot_frames(self.snapshot, view, max_frame_bytes)
            # Kept for a bounded number of views: a snapshot can serve a quiet stream's handshakes for hours,
            # and clients choose their filters.
            if len(self._view_frames) < MAX_VIEW_ENCODINGS:
                self._view_frames[(view.id, max_frame_bytes)] = frames
        return frames

    def frames(self, max_frame_bytes: int) -> list[str]:
        frames = self._frames.get(max_frame_bytes)
        if frames is None:
            frames = self._frames[max_frame_bytes] = encode_snapshot(self.snapshot, max_frame_bytes)
        return frames


class StreamHub:
    def __init__(self, log: StreamLog, stream: str, *, ring_size: int, block_ms: int = 1000,
                 queue_size: int = 256, behind_wait_s: float = LOG_BEHIND_WAIT_S) -> None:
        self.log = log  # followed here; connections read history and snapshots with it
        self._stream = stream
        self.ring: deque[LiveEntry] = deque(maxlen=ring_size)
        self.block_ms = block_ms
        self.queue_size = queue_size
        self.subscriptions: set[Subscription] = set()
        self.epoch = ""
        self.head_seq = 0
        self.head_digest = ""  # of the entry at head_seq, when this pod read it ("" after a reset: unknown)
        self.behind_wait_s = behind_wait_s
        self._behind_since: float | None = None  # monotonic time the log was first seen ending before head_seq
        self.healthy = False
        self.started = asyncio.Event()
        self.views = StreamViews()  # filtered subscriptions only (issue 43)
        self._written_through = metrics.WRITTEN_THROUGH.labels(stream=stream)
        self._delivered = metrics.ENTRIES_DELIVERED.labels(stream=stream)
        self._sweep = Sweep(self.subscriptions, self._count_round)  # the fan-out of what this hub reads
        # Connections' reads, shared by the handshakes that ask together (``batched``).
        self._meta_reads: Batched[None, StreamMeta] = shared(log.meta)
        self._snapshot_reads: Batched[None, EncodedSnapshot] = shared(self._read_snapshot)
        self._entry_reads: Batched[int, Entry | None] = Batched(self._read_entries_at)
        # The last snapshot read at this pod's head, in its epoch: what ``_head_snapshot`` hands out.
        self._snapshot_at_head: EncodedSnapshot | None = None
        self._replays: dict[tuple[str, int, int, int], tuple[list[str], bytes]] = {}

    @property
    def stream(self) -> str:
        return self._stream

    def subscribe(self) -> Subscription:
        subscription = Subscription(self.queue_size)
        subscription.offered = self._sweep.latest  # the batches read from now on
        self.subscriptions.add(subscription)
        return subscription

    def end_all(self, reason: EndReason) -> None:
        for subscription in self.subscriptions:
            subscription.end(reason)

    def unsubscribe(self, subscription: Subscription) -> None:
        self.subscriptions.discard(subscription)

    def ring_after(self, seq: int, limit: int) -> list[LiveEntry] | None:
        """Up to ``limit`` ring entries after ``seq``, or None when the ring does not start at ``seq + 1``
        or earlier (the caller must read Redis). At or past the head this pod has read, none: every later
        entry reaches a subscription made before this call live, as the hub reads it — a client joining a
        quiet stream (the ring empty since the pod started) costs no read of the log."""
        if self.started.is_set() and seq >= self.head_seq:
            return []
        if not self.ring or self.ring[0].entry.seq > seq + 1:
            return None
        start = seq + 1 - self.ring[0].entry.seq
        return [self.ring[i] for i in range(max(start, 0), min(len(self.ring), max(start, 0) + limit))]

    async def meta(self) -> StreamMeta:
        """The stream's meta for a connection's handshake, read after this call (never an older read)."""
        return await self._meta_reads(None)

    async def snapshot(self, max_frame_bytes: int) -> tuple[Snapshot, list[str]]:
        """A snapshot at least as new as this pod's head when called, and its frames: one read and one
        encoding for every connection that asked while the previous read was out, and none while the head
        has not moved since (``_head_snapshot``)."""
        encoded = self._head_snapshot() or await self._snapshot_reads(None)
        return encoded.snapshot, encoded.frames(max_frame_bytes)

    async def view_snapshot(self, view: View, max_frame_bytes: int) -> tuple[Snapshot, list[str]]:
        """As ``snapshot``, its items filtered by ``view`` (encoded once per view and read)."""
        encoded = self._head_snapshot() or await self._snapshot_reads(None)
        return encoded.snapshot, encoded.view_frames(self.views, view, max_frame_bytes)

    def _head_snapshot(self) -> EncodedSnapshot | None:
        """The last snapshot read, while it is at this pod's head in the hub's epoch (and the hub follows the
        log without error). A connection subscribed before asking gets every entry after the head live, as a
        snapshot read now would have it, so that one is as good: the state changes only with an entry
        (a later seq) or a new epoch, either of which ends its use. When 5,000 clients connected at once,
        the reads were 1 in 7 handshakes and ~7 % of the pod's CPU."""
        encoded = self._snapshot_at_head
        if encoded is None or not self.healthy or not self.started.is_set():
            return None
        if encoded.snapshot.epoch != self.epoch or encoded.snapshot.seq != self.head_seq or not self.epoch:
            self._snapshot_at_head = None
            return None
        return encoded

    def replay_frames(self, epoch: str, first_seq: int, last_seq: int, max_frame_bytes: int,
                      encoded: Callable[[], Sequence[EncodedEntry]]) -> tuple[list[str], bytes]:
        """The ``entries`` frames of the run ``first_seq``..``last_seq`` of ``epoch`` (``encoded``: its entries'
        encodings, asked only when this pod has not packed that run yet), and their WebSocket bytes: packed
        once for every connection that replays the same run. Within an epoch a seq names one entry for good
        (a log that went back gets a new epoch), so the run's frames are the same whoever asks. After a pod
        was lost, its 1,000 clients resumed here from one seq and each packed the same ~100 entries again: a
        seventh of this pod's CPU while they came back."""
        key = (epoch, first_seq, last_seq, max_frame_bytes)
        found = self._replays.get(key)
        if found is None:
            frames = pack_entries(epoch, encoded(), max_frame_bytes)
            found = (frames, serialize_text_frames(frames))
            if len(self._replays) >= MAX_REPLAY_ENCODINGS:
                del self._replays[next(iter(self._replays))]  # the oldest: resumes ask for the newest runs
            self._replays[key] = found
        return found

    async def views_ready(self) -> StreamViews:
        """The stream's views, once its mode (update: removals) was read from its descriptor."""
        if self.views.removals is None:
            self.views.learn_mode(await self.log.descriptor())
        return self.views

    async def entry_at(self, seq: int) -> Entry | None:
        """The log's entry at ``seq`` (None if it holds none), read after this call from the log, never the ring:
        what a resuming connection's digest is checked against. Clients resuming together (most at the same
        seq, the head) share the reads."""
        return await self._entry_reads(seq)

    async def _read_entries_at(self, seqs: list[int]) -> list[Entry | None]:
        distinct = sorted(set(seqs))
        found = await asyncio.gather(*(self.log.read_after(seq - 1, 1) for seq in distinct))
        held = {seq: entries[0] for seq, entries in zip(distinct, found, strict=True)
                if entries and entries[0].seq == seq}
        return [held.get(seq) for seq in seqs]

    async def _read_snapshot(self) -> EncodedSnapshot:
        encoded = EncodedSnapshot(await self.log.snapshot())
        if encoded.snapshot.epoch == self.epoch and encoded.snapshot.seq == self.head_seq:
            self._snapshot_at_head = encoded
        return encoded

    async def run(self) -> None:
        sweep = asyncio.create_task(self._sweep.run(), name=f"sweep-{self.stream}")
        try:
            await self._follow_forever()
        finally:
            sweep.cancel()

    async def _follow_forever(self) -> None:
        backoff = 0.05
        while True:
            try:
                await self._follow()
            except asyncio.CancelledError:
                raise
            except UNAVAILABLE as error:
                self.healthy = False
                metrics.REDIS_ERRORS.labels(operation="xread").inc()
                log.warning("hub lost redis", extra={"fields": {"stream": self.stream, "error": str(error)}})
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 2.0)
            except Exception:
                # Anything else (a reply the client could not make sense of while Redis restarted, seen on
                # kind): the hub must not end, or the pod stays unready ("stream readers not following")
                # with nothing in its log after the error. Logged with its traceback, then followed again.
                self.healthy = False
                metrics.REDIS_ERRORS.labels(operation="xread").inc()
                log.exception("hub failed, following again", extra={"fields": {"stream": self.stream}})
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 2.0)
            else:
                backoff = 0.05

    async def _follow(self) -> None:
        meta = await self.log.meta()
        if meta.epoch != self.epoch and (self.epoch or not self.started.is_set()):
            self._reset(meta)
        else:  # following again after an error (a failover?): the log may have gone back under this pod
            await self._check_head(meta)
        self.healthy = True
        self.started.set()
        while True:
            # With the entry at the head, read on the XREAD's connection: after a failover the XREAD may be
            # resent to the new primary without an error reaching here, and a log that went back there and
            # was written again under the same seqs would continue by seq as if nothing happened.
            held, entries = await self.log.follow_after(self.head_seq, 1000, self.block_ms)
            if (self.head_digest and (held is None or held.digest != self.head_digest)
                    and await self._check_head(await self.log.meta(), held)):
                continue  # reset: follow the new epoch from its head
            if not entries:
                meta = await self.log.meta()  # quiet: a good moment to notice a lost log (new epoch)
                metrics.SINK_DUPLICATES.labels(stream=self.stream).set(
                    meta.counters.get("duplicates_suppressed", 0))
                await self._check_head(meta)
                continue
            if not self.epoch:  # the first commit to an empty stream created its epoch just now
                self.epoch = (await self.log.meta()).epoch
            if self.views.mode_wanted(time.monotonic()):
                # Filtered connections opened before the stream's writer stored its descriptor (a page opened
                # before the job's first commit): learn the mode before they see these entries, so an update
                # stream's removals reach them too (their senders follow the mode, ViewSender).
                self.views.learn_mode(await self.log.descriptor())
            self._publish(entries)

    def _publish(self, entries: list[Entry]) -> None:
        batch = LiveBatch(epoch=self.epoch)
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
            self.head_digest = entry.digest
        self.ring.extend(batch)
        metrics.HEAD_SEQ.labels(stream=self.stream).set(self.head_seq)
        self._sweep.add(batch)

    def _count_round(self, written_through: int, delivered: int, oldest_commit_ms: int) -> None:
        """Once per fan-out round, not per connection: at thousands of clients the metric calls cost more
        than the writes. The latency is that of the round's oldest entry at its last write through."""
        self._written_through.inc(written_through)
        self._delivered.inc(delivered)
        metrics.DELIVERY_LATENCY.observe(max(time.time() * 1000 - oldest_commit_ms, 0) / 1000)

    async def _check_head(self, meta: StreamMeta, held: Entry | None = None) -> bool:
        """Whether the log still holds the last entry this pod read (``continuity.head_verdict``); if it went back
        in the same epoch (a lagging replica promoted: another entry at that seq, or none for
        ``behind_wait_s``), a new epoch is declared through the log's own script
        (``declare_rewind.lua``: checked and changed in one call, so pods that see it together declare one
        epoch), and every connection is closed 4409 "stream rewound": they resume with a snapshot. True when
        the hub was reset (another epoch, declared here or found), False when it goes on. ``held``: the entry at
        the head if just read."""
        if meta.epoch != self.epoch:
            if self.epoch:
                self._reset(meta)
                return True
            return False
        if self.head_seq <= 0:
            return False
        if meta.last_seq >= self.head_seq and held is None:
            if not self.head_digest:
                return False
            found = await self.log.read_after(self.head_seq - 1, 1)
            held = found[0] if found else None
        if meta.last_seq >= self.head_seq:
            self._behind_since = None
        elif self._behind_since is None:
            self._behind_since = time.monotonic()
            log.warning("stream log behind what this pod read: waiting for it", extra={"fields": {
                "stream": self.stream, "epoch": self.epoch, "seq": self.head_seq, "logLastSeq": meta.last_seq,
                "waitS": self.behind_wait_s}})
        behind_for = 0.0 if self._behind_since is None else time.monotonic() - self._behind_since
        verdict = head_verdict(self.head_seq, self.head_digest, meta.last_seq, held, behind_for_s=behind_for,
                               wait_s=self.behind_wait_s)
        if verdict != "rewound":
            return False
        status, epoch = await self.log.declare_rewind(self.epoch, self.head_seq, self.head_digest)
        if status == "intact":  # the log reached that entry again meanwhile (a read of a moving log): go on
            return False
        metrics.REWINDS.labels(stream=self.stream, outcome=status).inc()
        log.warning("stream rewound: the log went back in the same epoch", extra={"fields": {
            "stream": self.stream, "epoch": self.epoch, "seq": self.head_seq, "digest": self.head_digest,
            "logLastSeq": meta.last_seq, "heldDigest": held.digest if held else None, "newEpoch": epoch,
            "declared": status == "declared"}})
        self.end_all("stream_rewound")
        self._adopt(await self.log.meta())
        return True

    def _reset(self, meta: StreamMeta) -> None:
        """The log this pod followed is gone (new epoch): connections must start over from a snapshot."""
        if self.epoch:
            log.warning("stream epoch changed", extra={"fields": {"stream": self.stream, "old": self.epoch,
                                                                  "new": meta.epoch}})
            self.end_all("stream_reset")
        self._adopt(meta)

    def _adopt(self, meta: StreamMeta) -> None:
        self._snapshot_at_head = None
        self._replays.clear()
        self._sweep.clear()
        self._behind_since = None
        self.epoch = meta.epoch
        self.head_seq = meta.last_seq
        self.head_digest = ""
        self.ring.clear()

