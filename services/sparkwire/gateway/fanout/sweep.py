"""How a stream's batches reach a pod's subscriptions: in rounds over the subscriptions, each handed, in one
offer, everything read since its last (``Sweep``).

Why rounds and not one loop per batch: at 10,000 connections one pass of writes takes ~150 ms of the pod's
core, longer than the gap between batches (100 ms in the benchmark). With a loop per batch, a batch read just
after a loop began waited for that loop to end, then for its client's turn in the next: up to two passes. A
round yields to the event loop every few milliseconds, so a batch read meanwhile joins it at once. The
connections not yet visited get both batches in one write, and each entry reaches every connection within
one pass of its read. While the pod keeps up, a round is exactly the old loop: one batch, every connection."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Collection

from sparkwire.gateway.fanout.subscription import LiveBatch, Subscription

log = logging.getLogger(__name__)

# How long a round writes before it lets the event loop read (the next batch, clients' frames, handshakes).
SLICE_S = 0.005
# The clock is read once per this many subscriptions: a write is ~10 µs, a clock read ~0.1 µs.
CLOCK_EVERY = 32

RoundDone = Callable[[int, int, int], None]


class Sweep:
    """The batches not yet offered to every subscription, by index (1, 2, ...), and the rounds that offer
    them. Each subscription's ``offered`` is the index of the last batch it was offered: set to ``latest``
    when it subscribes (it gets the batches added after) and at each offer, so it gets every batch once,
    in order, as one batch or joined with the next ones.

    ``round_done(connections written through, entries written through, commit ms of the round's oldest
    entry)`` is called after each round that offered anything: the hub's metrics, once per round."""

    __slots__ = ("_batches", "_floor", "_joined", "_latest", "_round_done", "_subscriptions", "_wake", "slice_s")

    def __init__(self, subscriptions: Collection[Subscription], round_done: RoundDone, *,
                 slice_s: float = SLICE_S) -> None:
        self._subscriptions = subscriptions
        self._round_done = round_done
        self.slice_s = slice_s
        self._batches: dict[int, LiveBatch] = {}
        self._joined: dict[tuple[int, int], LiveBatch] = {}
        self._latest = 0
        self._floor = 0  # batches at or below it are gone (``clear``): nothing to offer for them
        self._wake = asyncio.Event()

    @property
    def latest(self) -> int:
        """The index of the last batch added: a new subscription's ``offered``."""
        return self._latest

    @property
    def waiting(self) -> int:
        """Batches not yet offered to every subscription."""
        return len(self._batches)

    def add(self, batch: LiveBatch) -> None:
        if not batch:
            return
        self._latest += 1
        self._batches[self._latest] = batch
        self._wake.set()

    def clear(self) -> None:
        """Forget the batches waiting: the stream's epoch changed and every subscription was ended."""
        self._batches.clear()
        self._joined.clear()
        self._floor = self._latest

    def since(self, offered: int) -> LiveBatch | None:
        """The batches after ``offered`` through ``latest`` as one batch (joined once per run of indexes, for
        every subscription at the same place), or None when there are none."""
        first = max(offered, self._floor) + 1
        latest = self._latest
        if first > latest:
            return None
        if first == latest:
            return self._batches[latest]
        joined = self._joined.get((first, latest))
        if joined is None:
            parts = [self._batches[index] for index in range(first, latest + 1)]
            joined = self._joined[(first, latest)] = LiveBatch(
                [live for part in parts for live in part], epoch=parts[-1].epoch, parts=parts)
        return joined

    async def run(self) -> None:
        """Rounds while batches wait, forever."""
        while True:
            await self._wake.wait()
            self._wake.clear()
            while self._batches:
                try:
                    await self.round()
                except asyncio.CancelledError:
                    raise
                except Exception:  # the fan-out must not end: every connection of the pod depends on it
                    log.exception("a fan-out round failed")
                    await asyncio.sleep(0.05)

    async def round(self) -> None:
        """Offer every subscription what was added since its last offer, yielding every ``slice_s``; then
        drop the batches every subscription has been offered."""
        start = self._latest
        oldest = self._batches[min(self._batches)]
        oldest_commit_ms = oldest[0].entry.commit_ms
        subscriptions = self._subscriptions
        written = delivered = 0
        latest = start
        # Most subscriptions were offered through the same index: their batch is looked up once.
        batch_after, batch = -1, None
        deadline = time.monotonic() + self.slice_s
        for count, subscription in enumerate(list(subscriptions), 1):
            offered = subscription.offered
            if offered < latest and subscription in subscriptions:
                if offered != batch_after:
                    batch_after, batch = offered, self.since(offered)
                subscription.offered = latest
                if batch is not None:
                    got = subscription.offer(batch)
                    if got is not None:
                        written += 1
                        delivered += got
            if count % CLOCK_EVERY == 0 and time.monotonic() >= deadline:
                await asyncio.sleep(0)
                deadline = time.monotonic() + self.slice_s
                latest, batch_after = self._latest, -1  # batches were added, or cleared, meanwhile
        # Every subscription now has been offered through ``start`` (those that came since, from later on).
        for index in [index for index in self._batches if index <= start]:
            del self._batches[index]
        self._joined = {key: joined for key, joined in self._joined.items() if key[0] > start}
        if written:
            self._round_done(written, delivered, oldest_commit_ms)
