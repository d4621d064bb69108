"""A stream's ack budget on one pod: the policy moves only when the connection count moves it by a step, and a
connection whose client has an older policy sends the new one before its next frame (and the hub's
write-through leaves that batch to it), then goes on writing through."""

from __future__ import annotations

import asyncio
import json
import time

import pytest

from sparkwire.gateway.connection.ack_budget import STEP, AckBudget
from sparkwire.gateway.connection.sender import Sender, Timers
from sparkwire.gateway.fanout.subscription import LiveBatch, LiveEntry
from sparkwire.protocol.limits import MAX_ACK_INTERVAL_MS
from sparkwire.protocol.server_frames import AckPolicy, encode_entry
from sparkwire.replaylog.model import Entry

from ..connection_fakes import FakeSocket, FakeWire, fake_lane, frame_texts, hub_with, settings
from .test_sender import running, until

pytestmark = pytest.mark.timeout(30)


def test_the_policy_moves_by_steps_of_the_connection_count() -> None:
    budget = AckBudget(settings(ack_every=10, ack_interval_ms=1000, acks_per_second=1000))
    first = budget.policy
    assert first == AckPolicy(10, 1000)
    assert budget.update(900) is first  # within the budget: the welcome's own policy
    assert budget.update(1999) is first  # 1.999x the interval: not a step yet
    second = budget.update(2000)
    assert second == AckPolicy(20, 2000) and budget.policy is second
    assert budget.update(3000) is second  # a count that wobbles sends nothing
    assert budget.update(10_000).ack_interval_ms == 10_000
    assert budget.update(50_000).ack_interval_ms == MAX_ACK_INTERVAL_MS  # capped: 10 s, however many
    assert budget.update(10_000 // STEP + 1).ack_interval_ms == MAX_ACK_INTERVAL_MS  # not yet a step down
    assert budget.update(500).ack_interval_ms == 1000  # most left: ack more often again
    assert json.loads(budget.frame) == {"type": "acks", "ackEvery": 10, "ackIntervalMs": 1000}


def test_a_connection_gets_the_new_policy_before_its_next_batch_then_writes_through_again() -> None:
    async def run() -> tuple[list[list[dict[str, object]]], list[int | None]]:
        hub = await hub_with(5)
        config = settings(ack_every=10, ack_interval_ms=1000, acks_per_second=1000)
        budget = AckBudget(config)
        socket, wire = FakeSocket(), FakeWire(direct=True)
        now = time.monotonic()
        timers = Timers(next_ping=now + 60, expires_at_monotonic=None, last_heard=now)
        sender = Sender(socket.as_websocket(), wire, hub, hub.subscribe(), config, timers, None, hub.epoch, 5,
                        acks=budget, acks_sent=budget.policy)
        results: list[int | None] = []

        def batch(seq: int) -> LiveBatch:
            entry = Entry(seq, f"r{seq}", "k", json.dumps({"n": seq}), 0, 0)
            return LiveBatch([LiveEntry(entry, encode_entry(entry))])

        async def body(task: asyncio.Task[None]) -> None:
            await asyncio.sleep(0.05)  # the sender is caught up and waits for live batches
            results.append(sender.write_through(batch(6)))  # the welcome's policy still holds: written through
            budget.update(4000)  # thousands joined
            refused = batch(7)
            results.append(sender.write_through(refused))  # left to the connection's task
            sender.subscription.offer(refused)
            await until(lambda: sender.delivered == 7, task)
            results.append(sender.write_through(batch(8)))  # the client has the new policy: through again

        await running(sender, body)
        return [[json.loads(text) for text in texts] for texts in wire.written], results

    written, results = asyncio.run(run())
    assert results == [1, None, 1]
    assert [[frame["type"] for frame in write] for write in written] == [["entries"], ["acks", "entries"], ["entries"]]
    assert written[1][0] == {"type": "acks", "ackEvery": 40, "ackIntervalMs": 4000}
    seqs = [frame["entries"][0]["seq"] for write in written for frame in write if frame["type"] == "entries"]
    assert seqs == [6, 7, 8]


def test_after_a_write_through_the_hubs_lane_takes_the_next_batches_until_the_ack_policy_moves() -> None:
    async def run() -> tuple[list[int | None], list[list[str]], list[list[str]], int]:
        hub = await hub_with(5)
        config = settings(ack_every=10, ack_interval_ms=1000, acks_per_second=1000)
        budget = AckBudget(config)
        parts, _, lane = fake_lane()
        socket, wire = FakeSocket(), FakeWire(direct=True, lane=parts)
        now = time.monotonic()
        timers = Timers(next_ping=now + 60, expires_at_monotonic=None, last_heard=now)
        subscription = hub.subscribe()
        sender = Sender(socket.as_websocket(), wire, hub, subscription, config, timers, None, hub.epoch, 5,
                        acks=budget, acks_sent=budget.policy)
        subscription.write_through = sender.write_through
        results: list[int | None] = []

        def batch(seq: int) -> LiveBatch:
            entry = Entry(seq, f"r{seq}", "k", json.dumps({"n": seq}), 0, 0)
            return LiveBatch([LiveEntry(entry, encode_entry(entry))], epoch=hub.epoch)

        async def body(task: asyncio.Task[None]) -> None:
            await asyncio.sleep(0.05)  # the sender is caught up and waits for live batches
            results.append(subscription.offer(batch(6)))  # through the sender, which arms the lane
            results.append(subscription.offer(batch(7)))  # through the lane
            budget.update(4000)  # thousands joined: the lane leaves the batch to the sender, which leaves it
            results.append(subscription.offer(batch(8)))  # to the connection's task (acks, then entries)
            await until(lambda: sender.delivered == 8, task)
            await asyncio.sleep(0.01)
            results.append(subscription.offer(batch(9)))  # through the sender again, which arms the lane again
            results.append(subscription.offer(batch(10)))  # through the lane

        await running(sender, body)
        return (results, [[json.loads(t)["type"] for t in texts] for texts in wire.written],
                [frame_texts(data) for data in lane.written], sender.delivered)

    results, by_sender, by_lane, delivered = asyncio.run(run())
    assert results == [1, 1, None, 1, 1] and delivered == 10
    assert by_sender == [["entries"], ["acks", "entries"], ["entries"]]
    assert [[json.loads(t)["entries"][0]["seq"] for t in texts] for texts in by_lane] == [[7], [10]]
