"""The socket under a connection: frames serialized once, the light queue uvicorn's protocol uses, its lean
constructor, and the lane's gate the protocol moves."""

from __future__ import annotations

import asyncio
from typing import Any, cast

import pytest
import uvicorn
from uvicorn.protocols.websockets.websockets_sansio_impl import WebSocketsSansIOProtocol
from uvicorn.server import ServerState
from websockets.frames import Frame, Opcode
from websockets.streams import StreamReader

from sparkwire.gateway.transport.contract import Message, serialize_text_frames
from sparkwire.gateway.transport.queues import Inbox
from sparkwire.gateway.transport.uvicorn_websocket import SparkwireWebSocketProtocol
from sparkwire.gateway.transport.wire import Wire

from .test_wire import FakeTransport


def parse_frames(data: bytes) -> list[Frame]:
    reader = StreamReader()
    reader.feed_data(data)
    frames = []
    while reader.buffer:
        parser = Frame.parse(reader.read_exact, mask=False)
        try:
            next(parser)
        except StopIteration as done:
            frames.append(done.value)
    return frames


@pytest.mark.parametrize("size", [0, 125, 126, 65_535, 65_536, 200_000])  # the three length encodings
def test_serialized_frames_parse_back_as_unmasked_text_frames(size: int) -> None:
    texts = ["x" * size, '{"type":"entries","é":1}']
    frames = parse_frames(serialize_text_frames(texts))
    assert [(f.opcode, f.fin, f.data.decode()) for f in frames] == [(Opcode.TEXT, True, t) for t in texts]


def test_the_inbox_queues_until_a_listener_takes_the_backlog_then_every_message() -> None:
    async def scenario() -> tuple[Message, list[Message], bool]:
        inbox = Inbox()
        inbox.put_nowait({"n": 1})
        first = await inbox.get()
        inbox.put_nowait({"n": 2})
        inbox.put_nowait({"n": 3})
        heard: list[Message] = []
        inbox.listen(heard.append)
        inbox.put_nowait({"n": 4})
        inbox.listen(None)
        inbox.put_nowait({"n": 5})
        return first, heard, inbox.empty()

    first, heard, empty = asyncio.run(scenario())
    assert first == {"n": 1} and heard == [{"n": 2}, {"n": 3}, {"n": 4}] and not empty


def test_get_waits_for_a_message() -> None:
    async def scenario() -> Message:
        inbox = Inbox()
        asyncio.get_running_loop().call_later(0.02, inbox.put_nowait, {"n": 1})
        return await asyncio.wait_for(inbox.get(), 1)

    assert asyncio.run(scenario()) == {"n": 1}


def made_by_uvicorn_and_by_us() -> tuple[WebSocketsSansIOProtocol, SparkwireWebSocketProtocol]:
    config = uvicorn.Config(app=lambda scope, receive, send: None, ws=SparkwireWebSocketProtocol)
    config.load()
    state = ServerState()
    loop = asyncio.new_event_loop()
    try:
        return (WebSocketsSansIOProtocol(config, state, {}, _loop=loop),
                SparkwireWebSocketProtocol(config, state, {}, _loop=loop))
    finally:
        loop.close()


def test_the_lean_constructor_sets_every_attribute_uvicorns_own_sets_alike() -> None:
    theirs, ours = made_by_uvicorn_and_by_us()
    assert [name for name in vars(theirs) if not hasattr(ours, name)] == []
    replaced = {"logger", "queue", "writable", "conn", "loop"}  # ours by design (see the class), or objects
    for name in set(vars(theirs)) - replaced:
        assert getattr(ours, name) == getattr(theirs, name), name
    assert (ours.conn.state, ours.conn.max_message_size) == (theirs.conn.state, theirs.conn.max_message_size)
    assert [vars(e) for e in ours.conn.available_extensions or ()] == [
        vars(e) for e in theirs.conn.available_extensions or ()] != []  # uvicorn's default: compression offered


def test_opened_its_websocket_side_parses_frames_from_the_first_byte() -> None:
    config = uvicorn.Config(app=lambda scope, receive, send: None)
    config.load()
    protocol = SparkwireWebSocketProtocol(config, ServerState(), {}, _loop=asyncio.new_event_loop(), opened=True)
    protocol.conn.receive_data(Frame(Opcode.TEXT, b'{"type":"hello"}').serialize(mask=True))
    assert [(e.opcode, e.data) for e in protocol.conn.events_received()] == [(Opcode.TEXT, b'{"type":"hello"}')]


@pytest.mark.parametrize("event", ["close_sent", "disconnected", "pause_writing"])
def test_the_protocol_closes_its_lane_gate_on_a_close_sent_a_disconnect_or_a_paused_buffer(event: str) -> None:
    _, protocol = made_by_uvicorn_and_by_us()
    protocol.transport = cast(Any, FakeTransport())
    lane = Wire(protocol).lane()
    assert lane is not None and lane.gate.open and lane.transport is protocol.transport
    if event == "pause_writing":
        protocol.pause_writing()
        assert not lane.gate.open
        protocol.resume_writing()
        assert lane.gate.open
        return
    setattr(protocol, event, True)
    assert getattr(protocol, event) and not lane.gate.open
    protocol.resume_writing()
    assert not lane.gate.open
