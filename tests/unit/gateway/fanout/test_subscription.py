"""The connection's mailbox: bounded, woken by a batch or an end, the first end reason kept."""

from __future__ import annotations

import asyncio
import json
import time

import pytest

from sparkwire.gateway.fanout.subscription import LiveBatch, LiveEntry, Subscription
from sparkwire.gateway.recovery.junction import ReplayMerger
from sparkwire.protocol.filter_form import parse_filter
from sparkwire.protocol.scope import View
from sparkwire.protocol.server_frames import encode_entry
from sparkwire.protocol.view_feed import CompiledView, ViewFeed, compile_view
from sparkwire.replaylog.model import Entry

from ..connection_fakes import fake_lane, frame_texts


def test_a_full_mailbox_ends_as_a_slow_consumer_and_takes_nothing_more() -> None:
    subscription = Subscription(limit=2)
    for _ in range(2):
        subscription.offer(LiveBatch())
    assert subscription.ended is None
    subscription.offer(LiveBatch())
    assert subscription.ended == "slow_consumer"
    assert len(subscription.take()) == 2
    subscription.offer(LiveBatch())
    assert subscription.take() == []


def test_the_first_end_reason_wins() -> None:
    subscription = Subscription(limit=4)
    subscription.end("draining")
    subscription.end("receiver")
    assert subscription.ended == "draining"


def test_wait_returns_at_once_for_a_batch_and_wakes_for_an_offer_or_an_end() -> None:
    async def scenario() -> list[float]:
        subscription = Subscription(limit=4)
        subscription.offer(LiveBatch())
        started = time.monotonic()
        await subscription.wait(10)  # a batch is waiting already
        took = [time.monotonic() - started]
        subscription.take()
        loop = asyncio.get_running_loop()
        loop.call_later(0.05, subscription.offer, LiveBatch())
        started = time.monotonic()
        await subscription.wait(10)
        took.append(time.monotonic() - started)
        subscription.take()
        loop.call_later(0.05, subscription.end, "stream_reset")
        started = time.monotonic()
        await subscription.wait(10)
        took.append(time.monotonic() - started)
        return took

    at_once, offered, ended = asyncio.run(scenario())
    assert at_once < 0.01 and 0.04 < offered < 1 and 0.04 < ended < 1


def test_wait_times_out_without_ending_anything() -> None:
    async def scenario() -> Subscription:
        subscription = Subscription(limit=4)
        await subscription.wait(0.05)
        return subscription

    subscription = asyncio.run(scenario())
    assert subscription.ended is None and subscription.take() == []


def test_a_batch_is_written_through_only_while_the_connection_waits_with_nothing_queued() -> None:
    async def scenario() -> tuple[list[int | bool | None], list[LiveBatch], list[LiveBatch]]:
        subscription = Subscription(limit=4)
        through: list[LiveBatch] = []
        subscription.write_through = lambda batch: 3 if through.append(batch) is None else None
        first, second, third = LiveBatch(), LiveBatch(), LiveBatch()
        results: list[int | bool | None] = [subscription.offer(first)]  # the connection is busy (not waiting): queued
        waiting = asyncio.create_task(subscription.wait(10))
        await asyncio.sleep(0)  # waits... but returns at once: a batch is queued
        await waiting
        subscription.take()
        waiting = asyncio.create_task(subscription.wait(10))
        await asyncio.sleep(0)
        results.append(subscription.offer(second))  # idle, nothing queued: through, and not woken
        await asyncio.sleep(0.01)
        results.append(waiting.done())
        subscription.write_through = lambda batch: None  # refused: queued, and the connection woken
        results.append(subscription.offer(third))
        await asyncio.wait_for(waiting, 1)
        return results, through, subscription.take()

    results, through, queued = asyncio.run(scenario())
    assert results == [None, 3, False, None]  # written through: the entries it delivered
    assert through == [LiveBatch()] and len(queued) == 1


def test_a_failing_write_through_falls_back_to_the_mailbox_for_good() -> None:
    async def scenario() -> tuple[int | None, int, bool]:
        subscription = Subscription(limit=4)
        calls = []

        def broken(batch: LiveBatch) -> int | None:
            calls.append(batch)
            raise RuntimeError("socket gone")

        subscription.write_through = broken
        waiting = asyncio.create_task(subscription.wait(10))
        await asyncio.sleep(0)
        through = subscription.offer(LiveBatch())
        await asyncio.wait_for(waiting, 1)
        return through, len(subscription.take()), subscription.write_through is None and len(calls) == 1

    assert asyncio.run(scenario()) == (None, 1, True)


def test_a_batchs_items_for_an_append_view_are_evaluated_once_and_are_what_a_feed_would_offer() -> None:
    """The connections of one view share a live batch's evaluation (issue 43, part 5): the first to ask
    evaluates, the rest get the same items; and those items make the frames a feed walking the batch
    itself makes."""
    entries = [Entry(seq=s, processing_id=f"p{s}", key=f"k{s % 7}", data=json.dumps({"tenant": f"t{s % 3}"}),
                     commit_ms=0, batch_id=0) for s in range(1, 31)]
    batch = LiveBatch([LiveEntry(e, encode_entry(e)) for e in entries])
    view = compile_view(View(None, parse_filter({"tenant": "t1"})), removals=False)
    parsed: list[int] = []

    def data_of(entry: Entry) -> object:
        parsed.append(entry.seq)
        return json.loads(entry.data)

    first = batch.view_items(view, data_of)
    assert [item.entry.seq for item in first] == [s for s in range(1, 31) if s % 3 == 1]
    assert batch.view_items(view, data_of) is first and len(parsed) == 30  # the second connection: no walk
    walking, sharing = ViewFeed(view, 0, now_ms=0), ViewFeed(view, 0, now_ms=0)
    assert walking.offer(entries, now_ms=5) == sharing.advance(first, entries[-1], now_ms=5)
    assert (walking.seen, walking.sent, walking.previous) == (sharing.seen, sharing.sent, {})
    with pytest.raises(ValueError, match="update-mode"):
        batch.view_items(compile_view(View(None, None), removals=True), data_of)


def test_the_first_view_to_ask_evaluates_the_batch_for_every_view_in_use_in_one_pass() -> None:
    """With the pod's views in use, the first ask walks the batch once for all of them; a view compiled
    after that walk (a connection that just joined) is evaluated on its own, and gets its own items."""
    entries = [Entry(seq=s, processing_id=f"p{s}", key=f"k{s}", data=json.dumps({"tenant": f"t{s % 3}"}),
                     commit_ms=0, batch_id=0) for s in range(1, 31)]
    batch = LiveBatch([LiveEntry(e, encode_entry(e)) for e in entries])
    in_use = [compile_view(View(None, parse_filter({"tenant": f"t{t}"})), removals=False) for t in range(3)]
    parsed: list[int] = []
    asked: list[int] = []

    def data_of(entry: Entry) -> object:
        parsed.append(entry.seq)
        return json.loads(entry.data)

    def views() -> list[CompiledView]:
        asked.append(1)
        return list(in_use)

    assert [item.entry.seq for item in batch.view_items(in_use[1], data_of, views)] == list(range(1, 31, 3))
    assert [item.entry.seq for item in batch.view_items(in_use[2], data_of, views)] == list(range(2, 31, 3))
    assert len(parsed) == 30 and len(asked) == 1  # one walk, one look at the views in use
    late = compile_view(View(None, parse_filter({"tenant": "t0"})), removals=False)
    assert [item.entry.seq for item in batch.view_items(late, data_of, views)] == list(range(3, 31, 3))
    assert len(asked) == 1 and len(parsed) == 60  # walked alone


class Budget:
    def __init__(self) -> None:
        self.policy = object()


def live_batch(first: int, count: int, epoch: str = "e1") -> LiveBatch:
    entries = [Entry(seq=seq, processing_id=f"p{seq}", key=f"k{seq}", data=json.dumps({"n": seq}), commit_ms=0,
                     batch_id=0) for seq in range(first, first + count)]
    return LiveBatch([LiveEntry(entry, encode_entry(entry)) for entry in entries], epoch=epoch)


class Lane:
    """A subscription armed as a sender arms it, after sending up to seq 10 in epoch e1, and waiting."""

    def __init__(self) -> None:
        self.subscription = Subscription(limit=4)
        lane, self.gate, self.transport = fake_lane()
        self.acks = Budget()
        self.merger = ReplayMerger(10)
        self.through: list[LiveBatch] = []
        self.subscription.write_through = lambda batch: None if self.through.append(batch) is None else 0
        self.subscription.arm_lane(lane, self.merger, "e1", self.acks, self.acks.policy, 1 << 20)

    async def offer(self, batch: LiveBatch) -> tuple[int | None, bool]:
        """What ``offer`` returned while the connection waited, and whether the connection was woken."""
        waiting = asyncio.create_task(self.subscription.wait(10))
        await asyncio.sleep(0)
        result = self.subscription.offer(batch)
        await asyncio.sleep(0.01)
        woken = waiting.done()
        waiting.cancel()
        return result, woken


def test_an_armed_lane_writes_the_run_due_next_without_waking_the_connection_or_asking_its_sender() -> None:
    async def scenario() -> tuple[list[tuple[int | None, bool]], Lane]:
        lane = Lane()
        return [await lane.offer(live_batch(11, 2)), await lane.offer(live_batch(13, 1))], lane

    results, lane = asyncio.run(scenario())
    assert results == [(2, False), (1, False)] and lane.merger.delivered == 13 and lane.through == []
    sent = [json.loads(text) for data in lane.transport.written for text in frame_texts(data)]
    assert [[entry["seq"] for entry in frame["entries"]] for frame in sent] == [[11, 12], [13]]
    assert {frame["epoch"] for frame in sent} == {"e1"}


@pytest.mark.parametrize("change", ["gate closed", "not due", "a gap", "another epoch", "a new ack policy",
                                    "transport closing"])
def test_a_lane_leaves_to_the_sender_any_batch_it_cannot_prove_due(change: str) -> None:
    async def scenario() -> tuple[tuple[int | None, bool], Lane]:
        lane = Lane()
        batch = live_batch(11, 2)
        if change == "gate closed":
            lane.gate.open = False
        elif change == "not due":
            batch = live_batch(5, 2)  # already sent
        elif change == "a gap":
            batch = live_batch(12, 2)
        elif change == "another epoch":
            batch = live_batch(11, 2, epoch="e2")
        elif change == "a new ack policy":
            lane.acks.policy = object()
        else:
            lane.transport.closing = True
        return await lane.offer(batch), lane

    (result, woken), lane = asyncio.run(scenario())
    assert lane.transport.written == [] and lane.merger.delivered == 10
    assert len(lane.through) == 1 and result is None and woken  # the sender's write_through refused: queued


def test_a_lane_is_not_used_while_the_connection_is_busy_or_has_batches_queued_or_ended() -> None:
    lane = Lane()
    assert lane.subscription.offer(live_batch(11, 1)) is None  # not waiting: queued for the connection's task
    lane.subscription.end("draining")
    assert lane.subscription.offer(live_batch(12, 1)) is None
    assert lane.transport.written == [] and lane.merger.delivered == 10 and len(lane.subscription.take()) == 1


def test_a_failing_lane_is_disarmed_and_the_batch_waits_for_the_connection() -> None:
    async def scenario() -> tuple[tuple[int | None, bool], Lane]:
        lane = Lane()
        lane.transport.fails = True
        return await lane.offer(live_batch(11, 1)), lane

    (result, woken), lane = asyncio.run(scenario())
    assert result is None and woken and lane.merger.delivered == 10 and len(lane.subscription.take()) == 1
    assert lane.subscription.write_through is None
    lane.transport.fails = False
    assert lane.subscription.offer(live_batch(11, 1)) is None and lane.transport.written == []  # disarmed
