"""The socket under a connection: frames serialized once, the light queue uvicorn's protocol uses, its lean
constructor, and the lane's gate the protocol moves."""

from __future__ import annotations

import asyncio
from typing import Any, cast

import pytest
import uvicorn
from hypothesis import given, settings
from hypothesis import strategies as st
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


def listening_protocol() -> tuple[SparkwireWebSocketProtocol, list[Message]]:
    config = uvicorn.Config(app=lambda scope, receive, send: None)
    config.load()
    protocol = SparkwireWebSocketProtocol(config, ServerState(), {}, _loop=asyncio.new_event_loop(), opened=True)
    protocol.transport = cast(Any, FakeTransport())
    protocol.handshake_complete = True
    heard: list[Message] = []
    protocol.queue.listen(heard.append)
    return protocol, heard


def test_websockets_parser_is_between_frames_only_with_no_part_of_a_frame_read() -> None:
    protocol, heard = listening_protocol()
    assert protocol._between_frames()
    ping = Frame(Opcode.PING, b"p").serialize(mask=True)  # read by websockets, which answers it
    protocol.data_received(ping)
    assert protocol._between_frames() and protocol.transport.written  # type: ignore[attr-defined]
    text = Frame(Opcode.TEXT, b'{"type":"ack"}').serialize(mask=True)
    protocol.data_received(ping + text[:6])  # the text's header and mask taken by websockets' parser
    assert not protocol._between_frames() and not protocol.conn.reader.buffer
    protocol.data_received(text[6:])
    assert protocol._between_frames() and heard == [{"type": "websocket.receive", "text": '{"type":"ack"}'}]
    protocol.data_received(Frame(Opcode.TEXT, b"part", fin=False).serialize(mask=True))
    assert not protocol._between_frames()  # a fragmented message begun


chunked_client_frames = st.lists(st.one_of(
    st.builds(lambda text: Frame(Opcode.TEXT, text.encode()), st.text(max_size=40)),
    st.builds(lambda text: Frame(Opcode.TEXT, text.encode()), st.text(min_size=130, max_size=140)),
    st.builds(lambda data: Frame(Opcode.TEXT, data), st.binary(max_size=8)),
    st.builds(lambda: Frame(Opcode.PING, b"k")), st.builds(lambda: Frame(Opcode.PONG, b"k")),
    st.builds(lambda a, b: [Frame(Opcode.TEXT, a.encode(), fin=False), Frame(Opcode.CONT, b.encode())],
              st.text(max_size=5), st.text(max_size=5)),
), max_size=6)


@settings(max_examples=200, deadline=None)
@given(chunked_client_frames, st.lists(st.integers(1, 60), max_size=6))
def test_a_listening_connection_hears_what_websockets_alone_would_and_closes_alike(
        frames: list[Frame | list[Frame]], cuts: list[int]) -> None:
    """The same client bytes, received in the same pieces, by the protocol and by one that leaves every byte
    to websockets: the same messages, in order, the same bytes answered, the same state after."""
    stream = b"".join(f.serialize(mask=True) for item in frames for f in (item if isinstance(item, list) else [item]))
    pieces, start = [], 0
    for cut in cuts:
        pieces.append(stream[start:start + cut])
        start += cut
    pieces.append(stream[start:])
    ours, our_messages = listening_protocol()
    reference, their_messages = listening_protocol()
    for piece in filter(None, pieces):
        ours.data_received(piece)
        WebSocketsSansIOProtocol.data_received(reference, piece)
    assert our_messages == their_messages
    assert ours.transport.written == reference.transport.written  # type: ignore[attr-defined]
    assert (ours.conn.state, ours.close_sent) == (reference.conn.state, reference.close_sent)


def test_a_protocol_error_closes_1002_after_the_messages_whole_before_it() -> None:
    """The one place the two differ: uvicorn drops every message of a read in which websockets then
    finds an error; the frames read here before it were whole and are heard."""
    protocol, heard = listening_protocol()
    text, stray_continuation = Frame(Opcode.TEXT, b"before"), Frame(Opcode.CONT, b"x")
    protocol.data_received(text.serialize(mask=True) + stray_continuation.serialize(mask=True))
    assert heard[0] == {"type": "websocket.receive", "text": "before"}
    assert heard[1]["type"] == "websocket.disconnect" and heard[1]["code"] == 1002
    assert protocol.close_sent
