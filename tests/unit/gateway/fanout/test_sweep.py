"""The hub's fan-out in rounds: every subscription offered every batch once, in order, a batch read during a
round joined to the one the round carries for the connections it has not reached yet."""

from __future__ import annotations

import asyncio
import contextlib
import json
import random

import pytest

from sparkwire.gateway.fanout.subscription import LiveBatch, LiveEntry, Subscription
from sparkwire.gateway.fanout.sweep import CLOCK_EVERY, Sweep
from sparkwire.protocol.filter_form import parse_filter
from sparkwire.protocol.scope import View
from sparkwire.protocol.server_frames import encode_entry
from sparkwire.protocol.view_feed import compile_view, view_items
from sparkwire.replaylog.model import Entry

Rounds = list[tuple[int, int, int]]


def batch(first: int, count: int = 1) -> LiveBatch:
    entries = [Entry(seq=seq, processing_id=f"p{seq}", key="k", data=json.dumps({"n": seq}), commit_ms=seq,
                     batch_id=0) for seq in range(first, first + count)]
    return LiveBatch([LiveEntry(entry, encode_entry(entry)) for entry in entries], epoch="e1")


def offered_seqs(subscription: Subscription) -> list[int]:
    return [live.entry.seq for batch in subscription.take() for live in batch]


def make(count: int, rounds: Rounds) -> tuple[set[Subscription], Sweep]:
    subscriptions: set[Subscription] = set()
    sweep = Sweep(subscriptions, lambda *counts: rounds.append(counts), slice_s=0.0)  # yield at every check
    for _ in range(count):
        subscription = Subscription(limit=1000)
        subscription.offered = sweep.latest
        subscriptions.add(subscription)
    return subscriptions, sweep


def test_a_batch_read_during_a_round_joins_it_for_the_connections_not_reached_yet() -> None:
    async def main() -> None:
        subscriptions, sweep = make(3 * CLOCK_EVERY, [])
        order = list(subscriptions)  # a round visits them in the set's order
        sweep.add(batch(1))
        first_round = asyncio.create_task(sweep.round())
        await asyncio.sleep(0)  # the round wrote to the first CLOCK_EVERY, then yielded
        sweep.add(batch(2))
        await first_round
        reached_first = [offered_seqs(s) for s in order[:CLOCK_EVERY]]
        reached_later = [s.take() for s in order[CLOCK_EVERY:]]
        assert reached_first == [[1]] * CLOCK_EVERY
        assert all(len(batches) == 1 and [live.entry.seq for live in batches[0]] == [1, 2]
                   for batches in reached_later)
        assert len({id(batches[0]) for batches in reached_later}) == 1  # joined once for all of them
        assert sweep.waiting == 1  # batch 2 is still owed to the first ones
        await sweep.round()
        assert [offered_seqs(s) for s in order[:CLOCK_EVERY]] == [[2]] * CLOCK_EVERY
        assert all(offered_seqs(s) == [] for s in order[CLOCK_EVERY:])
        assert sweep.waiting == 0

    asyncio.run(main())


@pytest.mark.parametrize("seed", [random.randrange(1 << 30) for _ in range(3)])
def test_every_subscription_is_offered_every_entry_once_in_order_however_reads_and_rounds_interleave(
        seed: int) -> None:
    chooser = random.Random(seed)

    async def main() -> None:
        subscriptions, sweep = make(0, [])
        joined_at: dict[Subscription, int] = {}  # the first seq each subscription must get
        runner = asyncio.create_task(sweep.run())
        seq = 0
        for _ in range(200):
            action = chooser.random()
            if action < 0.4:
                count = chooser.randint(1, 3)
                sweep.add(batch(seq + 1, count))
                seq += count
            elif action < 0.6:
                subscription = Subscription(limit=10_000)
                subscription.offered = sweep.latest
                subscriptions.add(subscription)
                joined_at[subscription] = seq + 1
            elif action < 0.65 and subscriptions:
                subscriptions.discard(chooser.choice(sorted(subscriptions, key=id)))
            for _ in range(chooser.randint(0, 3)):
                await asyncio.sleep(0)
        for _ in range(10_000):
            if not sweep.waiting:
                break
            await asyncio.sleep(0)
        runner.cancel()
        assert sweep.waiting == 0, seed
        for subscription in subscriptions:
            assert offered_seqs(subscription) == list(range(joined_at[subscription], seq + 1)), seed

    asyncio.run(main())


def test_a_cleared_sweep_offers_nothing_of_the_batches_that_waited() -> None:
    async def main() -> None:
        subscriptions, sweep = make(2, [])
        sweep.add(batch(1))
        sweep.clear()  # a new epoch: every subscription was ended, and the batch is not offered
        assert sweep.waiting == 0
        sweep.add(batch(1))
        await sweep.round()
        assert [offered_seqs(s) for s in subscriptions] == [[1], [1]]

    asyncio.run(main())


def test_a_round_reports_its_writes_through_once_with_its_oldest_entry() -> None:
    async def main() -> None:
        rounds: Rounds = []
        subscriptions, sweep = make(2, rounds)
        waiting = next(iter(subscriptions))
        waiting.write_through = len  # written straight through: it returns the entries written
        waits = asyncio.create_task(waiting.wait(10))
        await asyncio.sleep(0)
        sweep.add(batch(5, 2))
        await sweep.round()
        assert rounds == [(1, 2, 5)]  # one connection written through, 2 entries, the oldest committed at 5
        waits.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await waits
        sweep.add(batch(7))
        await sweep.round()  # nothing written through (both wait in their mailboxes): nothing reported
        assert rounds == [(1, 2, 5)]

    asyncio.run(main())


def test_joined_batches_match_each_entry_once_per_view_and_give_what_matching_them_whole_would() -> None:
    """Connections of one view offered from different places get different joined batches; each entry is
    matched against the view once for all of them (a saturated pod with 1,000 views matched the same entries
    again for every join), and a join's items are the ones its entries give matched whole."""
    async def main() -> None:
        subscriptions, sweep = make(3, [])
        behind, middle, ahead = list(subscriptions)
        middle.offered, ahead.offered = 1, 2  # as if earlier rounds had reached them further
        for first in (1, 4, 7):
            sweep.add(batch(first, 3))
        joins = [sweep.since(s.offered) for s in (behind, middle, ahead)]
        view = compile_view(View(None, parse_filter({"odd": True})), removals=False)
        matched: list[int] = []

        def data_of(entry: Entry) -> object:
            matched.append(entry.seq)
            return {"odd": entry.seq % 2 == 1}

        items = [join.view_items(view, data_of) for join in joins if join is not None]
        assert [[item.entry.seq for item in found] for found in items] == [[1, 3, 5, 7, 9], [5, 7, 9], [7, 9]]
        assert sorted(matched) == list(range(1, 10))  # each entry once, not once per join
        whole = [view_items(view, [live.entry for live in join], data_of) for join in joins if join is not None]
        assert items == whole

    asyncio.run(main())
