"""A uvicorn connection's direct path: the write flag, when a direct write is refused, and the lane's gate."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any, cast

import pytest

from sparkwire.gateway.transport.queues import MAX_BUFFERED_BYTES
from sparkwire.gateway.transport.wire import Wire, Writable


def test_writable_blocks_while_cleared_and_wakes_every_waiter_on_set() -> None:
    async def scenario() -> list[bool]:
        flag = Writable()
        await asyncio.wait_for(flag.wait(), 0.1)  # set at first
        flag.clear()
        waiters = [asyncio.create_task(flag.wait()) for _ in range(3)]
        await asyncio.sleep(0.02)
        blocked = [not w.done() for w in waiters]
        flag.set()
        await asyncio.wait_for(asyncio.gather(*waiters), 1)
        return [*blocked, flag.is_set()]

    assert all(asyncio.run(scenario()))


class FakeTransport:
    def __init__(self, buffered: int = 0, closing: bool = False) -> None:
        self.written: list[bytes] = []
        self.buffered, self.closing = buffered, closing

    def write(self, data: bytes) -> None:
        self.written.append(data)

    def is_closing(self) -> bool:
        return self.closing

    def get_write_buffer_size(self) -> int:
        return self.buffered

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return default  # no socket: a lane writes through the transport

    def close(self) -> None:
        self.closing = True

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass


def wire(transport: FakeTransport, **state: Any) -> Wire:
    writable = Writable()
    if not state.pop("writable", True):
        writable.clear()
    protocol = SimpleNamespace(transport=transport, close_sent=False, disconnected=False, handshake_complete=True,
                               writable=writable, conn=SimpleNamespace(extensions=state.pop("extensions", [])))
    for name, value in state.items():
        setattr(protocol, name, value)
    return Wire(cast(Any, protocol))


def test_a_direct_write_reaches_an_open_uncompressed_writable_socket() -> None:
    transport = FakeTransport()
    assert wire(transport).write(b"frames") and transport.written == [b"frames"]


@pytest.mark.parametrize("state", [
    {"close_sent": True}, {"disconnected": True}, {"handshake_complete": False},
    {"extensions": ["permessage-deflate"]}, {"writable": False},
])
def test_a_direct_write_is_refused_when_it_must_go_through_asgi(state: dict[str, Any]) -> None:
    transport = FakeTransport()
    assert not wire(transport, **state).write(b"frames") and transport.written == []


def test_an_urgent_write_ignores_a_paused_socket_but_not_a_runaway_buffer_or_a_closing_one() -> None:
    assert wire(FakeTransport(), writable=False).write(b"pong", urgent=True)
    assert not wire(FakeTransport(buffered=MAX_BUFFERED_BYTES), writable=False).write(b"pong", urgent=True)
    assert not wire(FakeTransport(closing=True)).write(b"pong", urgent=True)


def test_the_lane_gate_is_open_while_writable_and_shut_for_good_once_closing() -> None:
    gate = Writable()
    states = [gate.open]
    gate.clear()
    states.append(gate.open)
    gate.set()
    states.append(gate.open)
    gate.shut()
    states.append(gate.open)
    gate.set()  # uvicorn sets the flag again when the connection is lost, to wake its waiters
    states.append(gate.open)
    assert states == [True, False, True, False, False] and gate.is_set()


def test_a_compressed_connection_has_no_lane() -> None:
    assert wire(FakeTransport(), extensions=["permessage-deflate"]).lane() is None
    assert wire(FakeTransport()).lane() is not None
