"""A connection's sending side alone, over the in-memory log: history after the start joined with live by
seq (each entry once, in order), pings on time, the pong timeout, the token's expiry, and a close when the
history it needs is gone."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable

import pytest

from sparkwire.gateway.auth.tokens import Grant
from sparkwire.gateway.connection.ending import Close
from sparkwire.gateway.connection.sender import Sender, Timers
from sparkwire.gateway.fanout.hub import StreamHub
from sparkwire.gateway.fanout.subscription import LiveBatch, LiveEntry
from sparkwire.gateway.settings import ConnectionSettings
from sparkwire.protocol import CloseCode, Ping
from sparkwire.protocol.server_frames import encode_entry
from sparkwire.replaylog.memory import MemoryStreamLog
from sparkwire.replaylog.model import Record

from ..connection_fakes import FakeSocket, FakeWire, budget, hub_with, settings

pytestmark = pytest.mark.timeout(30)


def sender_for(hub: StreamHub, socket: FakeSocket, after: int, config: ConnectionSettings | None = None,
               grant: Grant | None = None, heard_ago: float = 0.0) -> Sender:
    config = config or settings()
    now = time.monotonic()
    timers = Timers(next_ping=now + config.ping_interval_s, expires_at_monotonic=None, last_heard=now - heard_ago)
    return Sender(socket.as_websocket(), FakeWire(), hub, hub.subscribe(), config, timers, grant, hub.epoch, after,
                  acks=budget(config))


async def until(condition: Callable[[], bool], task: asyncio.Task[None]) -> None:
    while not condition():
        assert not task.done(), task
        await asyncio.sleep(0.01)


async def running(sender: Sender, body: Callable[[asyncio.Task[None]], Awaitable[None]]) -> None:
    """Run the sender while ``body`` drives it, then end its subscription and wait for it."""
    task = asyncio.create_task(sender.run())
    try:
        await body(task)
    finally:
        sender.subscription.end("draining")
        await asyncio.wait_for(task, 5)


def test_history_after_the_start_is_sent_page_by_page_each_entry_once_in_order() -> None:
    async def run() -> list[int]:
        hub = await hub_with(30)
        socket = FakeSocket()
        sender = sender_for(hub, socket, after=10)  # page_size 8: three pages
        await running(sender, lambda task: until(lambda: sender.delivered == 30, task))
        return socket.entry_seqs()

    assert asyncio.run(run()) == list(range(11, 31))


def test_a_live_batch_past_a_missing_seq_is_joined_with_history_without_a_duplicate() -> None:
    async def run() -> list[int]:
        hub = await hub_with(10)
        socket = FakeSocket()
        sender = sender_for(hub, socket, after=10)

        async def body(task: asyncio.Task[None]) -> None:
            log = hub.log
            assert isinstance(log, MemoryStreamLog)
            entries = await log.commit([Record(f"r{n}", f"k{n % 5}", "{}") for n in range(11, 17)])
            # the live feed handed over 11..12, then 14..16: 13 must come from the log, 14 only once
            sender.subscription.offer(LiveBatch([LiveEntry(e, encode_entry(e)) for e in entries[:2]]))
            sender.subscription.offer(LiveBatch([LiveEntry(e, encode_entry(e)) for e in entries[3:]]))
            await until(lambda: sender.delivered == 16, task)

        await running(sender, body)
        return socket.entry_seqs()

    assert asyncio.run(run()) == list(range(11, 17))


def test_a_caught_up_connection_is_pinged_on_time() -> None:
    async def run() -> list[object]:
        hub = await hub_with(3)
        socket = FakeSocket()
        sender = sender_for(hub, socket, after=3, config=settings(ping_interval_s=0.05, pong_timeout_s=60))
        await running(sender, lambda task: until(lambda: sender.timers.pings >= 3, task))
        return socket.frames()

    assert asyncio.run(run())[:3] == [Ping(1), Ping(2), Ping(3)]


def test_a_client_unheard_for_longer_than_the_pong_timeout_ends_in_timeout() -> None:
    async def run() -> str | None:
        hub = await hub_with(3)
        sender = sender_for(hub, FakeSocket(), after=3, config=settings(ping_interval_s=0.05, pong_timeout_s=1),
                            heard_ago=2)
        await asyncio.wait_for(sender.run(), 5)
        return sender.subscription.ended

    assert asyncio.run(run()) == "timeout"


def test_an_expired_token_ends_the_connection_even_in_the_middle_of_a_replay() -> None:
    async def run() -> tuple[str | None, int]:
        hub = await hub_with(40)
        sender = sender_for(hub, FakeSocket(), after=0, grant=Grant("alice", expires_at=time.time() - 1))
        await asyncio.wait_for(sender.run(), 5)
        return sender.subscription.ended, sender.delivered

    ended, delivered = asyncio.run(run())
    assert ended == "token_expired" and delivered < 40  # the first page went, then the token was checked


def test_history_trimmed_past_the_start_closes_with_stream_reset() -> None:
    async def run() -> None:
        hub = await hub_with(30)
        log = hub.log
        assert isinstance(log, MemoryStreamLog)
        log.trim(20)
        await asyncio.wait_for(sender_for(hub, FakeSocket(), after=10).run(), 5)

    with pytest.raises(Close) as closed:
        asyncio.run(run())
    assert closed.value.code is CloseCode.STREAM_RESET


def test_with_a_direct_transport_history_goes_in_direct_writes_and_nothing_through_the_socket() -> None:
    """A client catching up (after a pod was lost, thousands at once) gets its pages as direct writes of
    the frames' bytes (``transport.wire``), the same entries in the same order as through the
    socket; without a direct path (plain ASGI, SSE) they go through the socket as before."""
    async def run(direct: bool) -> tuple[list[int], FakeWire, list[int]]:
        hub = await hub_with(30)
        socket, wire = FakeSocket(), FakeWire(direct=direct)
        now = time.monotonic()
        timers = Timers(next_ping=now + 60, expires_at_monotonic=None, last_heard=now)
        sender = Sender(socket.as_websocket(), wire, hub, hub.subscribe(), settings(), timers, None, hub.epoch, 10,
                        acks=budget())
        await running(sender, lambda task: until(lambda: sender.delivered == 30, task))
        written = [entry["seq"] for texts in wire.written for text in texts
                   for entry in json.loads(text)["entries"]]
        return (written if direct else socket.entry_seqs()), wire, socket.entry_seqs()

    via_wire, wire, through_socket = asyncio.run(run(direct=True))
    via_socket, _, _ = asyncio.run(run(direct=False))
    assert via_wire == via_socket == list(range(11, 31)) and through_socket == []
    assert len(wire.written) == 3  # one write per page of 8
