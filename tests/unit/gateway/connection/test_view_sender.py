"""A filtered subscription's sending side alone (issue 43), over the in-memory log: history and live turned
into frames that each cover ``(after, through]`` without a hole, a position frame when nothing matched, and
``delivered`` (what an ack may reach) the last ``through`` sent."""

from __future__ import annotations

import asyncio
import json
import time

import pytest

from sparkwire.client.coverage import ViewCoverage
from sparkwire.gateway.connection.sender import Timers
from sparkwire.gateway.connection.view_sender import ViewSender
from sparkwire.gateway.fanout.hub import StreamHub
from sparkwire.gateway.fanout.subscription import LiveBatch, LiveEntry
from sparkwire.protocol.filter_form import parse_filter
from sparkwire.protocol.scope import View
from sparkwire.protocol.server_frames import encode_entry, parse_server_frame
from sparkwire.protocol.view_frames import ViewEntriesFrame
from sparkwire.replaylog.model import Entry

from ..connection_fakes import FakeSocket, FakeWire, budget, fake_lane, hub_with, settings
from .test_sender import running, until

pytestmark = pytest.mark.timeout(30)


def view_sender(hub: StreamHub, socket: FakeSocket, after: int, wanted: object, interval_ms: int = 1000) -> ViewSender:
    config = settings()
    now = time.monotonic()
    timers = Timers(next_ping=now + config.ping_interval_s, expires_at_monotonic=None, last_heard=now)
    return ViewSender(socket.as_websocket(), FakeWire(direct=True), hub, hub.subscribe(), config, timers, None,
                      hub.epoch, after, View(None, parse_filter(wanted)), interval_ms=interval_ms, acks=budget(config))


def covered(socket: FakeSocket, start: int) -> tuple[ViewCoverage, list[int]]:
    coverage = ViewCoverage(start)
    seqs: list[int] = []
    for frame in socket.frames():
        assert isinstance(frame, ViewEntriesFrame)
        result = coverage.observe(frame)
        assert result.verdict == "next"
        seqs.extend(item.seq for item in result.fresh)
    return coverage, seqs


def test_history_then_live_in_frames_that_chain() -> None:
    async def run() -> tuple[ViewCoverage, list[int], int]:
        hub = await hub_with(30)  # data {"n": n} at seq n
        socket = FakeSocket()
        sender = view_sender(hub, socket, after=4, wanted={"n": {"in": [3, 9, 17, 31, 33]}})
        assert sender.write_through(LiveBatch()) is None  # an empty batch is no run due next

        async def body(task: asyncio.Task[None]) -> None:
            await until(lambda: sender.delivered == 30, task)
            live = [Entry(seq, f"r{seq}", f"k{seq % 5}", json.dumps({"n": seq}), 0, 0) for seq in (31, 32, 33)]
            sender.subscription.offer(LiveBatch([LiveEntry(entry, encode_entry(entry)) for entry in live]))
            await until(lambda: sender.delivered == 33, task)

        await running(sender, body)
        coverage, seqs = covered(socket, 4)
        return coverage, seqs, sender.delivered

    coverage, seqs, delivered = asyncio.run(run())
    assert seqs == [9, 17, 31, 33] and coverage.covered == delivered == 33


def test_a_position_frame_when_nothing_matched() -> None:
    async def run() -> list[ViewEntriesFrame]:
        hub = await hub_with(12)
        socket = FakeSocket()
        sender = view_sender(hub, socket, after=0, wanted={"n": -1}, interval_ms=50)
        await running(sender, lambda task: until(lambda: sender.delivered == 12, task))
        return [frame for frame in socket.frames() if isinstance(frame, ViewEntriesFrame)]

    frames = asyncio.run(run())
    assert [(frame.after, frame.through, frame.items) for frame in frames] == [(0, 12, ())]


def test_a_draining_pod_sends_the_position_it_reached_first() -> None:
    async def run() -> list[ViewEntriesFrame]:
        hub = await hub_with(6)
        socket = FakeSocket()
        sender = view_sender(hub, socket, after=0, wanted={"n": 2}, interval_ms=60_000)
        live = [Entry(seq, f"r{seq}", "k", json.dumps({"n": seq}), 0, 0) for seq in (7, 8)]

        async def body(task: asyncio.Task[None]) -> None:
            await until(lambda: sender.feed.seen == 6, task)
            sender.subscription.offer(LiveBatch([LiveEntry(entry, encode_entry(entry)) for entry in live]))
            await until(lambda: sender.feed.seen == 8, task)

        await running(sender, body)  # ends the subscription "draining"
        return [frame for frame in socket.frames() if isinstance(frame, ViewEntriesFrame)]

    frames = asyncio.run(run())
    assert [(frame.after, frame.through, len(frame.items)) for frame in frames] == [(0, 6, 1), (6, 8, 0)]


def live_batch(seqs: range) -> LiveBatch:
    entries = [Entry(seq, f"r{seq}", f"k{seq % 5}", json.dumps({"n": seq}), 0, 0) for seq in seqs]
    return LiveBatch([LiveEntry(entry, encode_entry(entry)) for entry in entries])


def test_a_caught_up_append_views_batches_are_written_through_with_bytes_its_connections_share() -> None:
    async def run() -> None:
        hub = await hub_with(30)
        wires = [FakeWire(direct=True), FakeWire(direct=True)]
        senders = [view_sender(hub, FakeSocket(), after=30, wanted={"n": {"in": [31, 33]}}) for _ in wires]
        for sender, wire in zip(senders, wires, strict=True):
            sender.transport = wire
        batch = live_batch(range(31, 34))
        assert [sender.write_through(batch) for sender in senders] == [2, 2]  # the entries each delivered
        [texts], [same] = (wire.written for wire in wires)
        assert texts == same and len(batch._view_wire) == 1  # one encoding for the two connections
        frame = parse_server_frame(texts[0])
        assert isinstance(frame, ViewEntriesFrame) and (frame.after, frame.through) == (30, 33)
        assert [item.seq for item in frame.items] == [31, 33] and senders[0].delivered == 33
        # Nothing of the view in the next batch and no position frame due yet: nothing written, the
        # position moves on, and the frame that tells it is due within the interval.
        assert senders[0].write_through(live_batch(range(34, 36))) == 0 and len(wires[0].written) == 1
        assert (senders[0].feed.seen, senders[0].delivered) == (35, 33) and senders[0].timers.position_due
        # Not the run due next, or an update stream (removals depend on each feed): the task's path.
        assert senders[0].write_through(live_batch(range(37, 39))) is None
        hub.views.removals = True
        assert senders[1].write_through(live_batch(range(34, 36))) is None

    asyncio.run(run())


def test_a_filtered_connection_never_arms_the_hubs_lane_whose_bytes_are_every_entry() -> None:
    async def run() -> tuple[list[int | None], list[bytes]]:
        hub = await hub_with(30)
        sender = view_sender(hub, FakeSocket(), after=30, wanted={"n": {"in": [31, 33]}})
        parts, _, lane = fake_lane()
        sender.transport = FakeWire(direct=True, lane=parts)
        sender._lane = sender.transport.lane()  # as made with it
        subscription = sender.subscription
        subscription.write_through = sender.write_through
        waiting = asyncio.create_task(subscription.wait(10))
        await asyncio.sleep(0)
        results = [subscription.offer(live_batch(range(31, 34))), subscription.offer(live_batch(range(34, 37)))]
        waiting.cancel()
        return results, lane.written

    results, by_lane = asyncio.run(run())
    assert results == [2, 0] and by_lane == []  # the view's frames, written by the view sender, none unfiltered
