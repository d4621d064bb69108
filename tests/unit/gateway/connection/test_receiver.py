"""A connection's receiving side alone: acks within what was sent move the session's bookmark and report
the client's counts once; pings are answered; a bad or unexpected frame ends the subscription and is kept."""

from __future__ import annotations

import asyncio
import time

from prometheus_client import REGISTRY

from sparkwire.gateway.connection.handshake import Admission
from sparkwire.gateway.connection.receiver import Receiver
from sparkwire.gateway.connection.sender import Sender, Timers
from sparkwire.gateway.store.session_store import SessionStore
from sparkwire.protocol import (
    Ack,
    CloseCode,
    Hello,
    Ping,
    Pong,
    ProtocolError,
    encode_ack,
    encode_heartbeat,
    encode_hello,
    parse_server_frame,
)
from sparkwire.replaylog.memory import MemorySessionRecords
from sparkwire.replaylog.port import SessionPosition

from ..connection_fakes import STREAM, FakeSocket, FakeWire, budget, hub_with, settings


class Parts:
    def __init__(self, stored: SessionPosition | None = None, accepts_replies: bool = True) -> None:
        self.hub = asyncio.run(hub_with(20))
        self.wire = FakeWire(accepts_replies)
        self.records = MemorySessionRecords()
        self.sessions = SessionStore(self.records, ttl_seconds=60, pod="test")
        self.subscription = self.hub.subscribe()
        now = time.monotonic()
        timers = Timers(next_ping=now + 60, expires_at_monotonic=None, last_heard=now - 30)
        self.sender = Sender(FakeSocket().as_websocket(), self.wire, self.hub, self.subscription, settings(),
                             timers, None, self.hub.epoch, after=10, acks=budget())
        self.receiver = Receiver(self.sender, self.sessions, Admission(Hello(1, "s1", None, None), None, "s1", stored),
                                 max_frame_bytes=8192)
        self.sender.merger.take_run(11, 20)  # started after 10, then sent 11..20

    def send(self, text: str) -> None:
        self.receiver.on_message({"type": "websocket.receive", "text": text})

    def stored(self) -> SessionPosition | None:
        async def lookup() -> SessionPosition | None:
            await self.sessions.flush()
            return (await self.sessions.lookup("s1", STREAM))[1]
        return asyncio.run(lookup())


def client_counts(name: str) -> float:
    return REGISTRY.get_sample_value(f"sparkwire_client_reported_{name}_total", {"stream": STREAM}) or 0.0


def ack(seq: int, duplicates: int = 0, gaps: int = 0) -> str:
    return encode_ack(Ack(seq=seq, duplicates=duplicates, gaps=gaps))


def test_an_ack_within_what_was_sent_is_the_sessions_next_position() -> None:
    parts = Parts()
    parts.send(ack(10))  # nothing new since the start: allowed
    parts.send(ack(14))
    parts.send(ack(20))
    assert parts.subscription.ended is None and parts.receiver.last_ack == 20
    assert parts.stored() == SessionPosition(parts.hub.epoch, 20)


def test_an_ack_beyond_what_was_sent_or_behind_the_last_ends_the_subscription_with_the_error_kept() -> None:
    for frames in ([ack(21)], [ack(9)], [ack(15), ack(14)]):
        parts = Parts()
        for frame in frames:
            parts.send(frame)
        assert parts.subscription.ended == "receiver"
        assert isinstance(parts.receiver.error, ProtocolError)
        assert parts.receiver.error.code is CloseCode.PROTOCOL_VIOLATION


def test_the_clients_counts_are_reported_once_above_the_adopted_sessions_baseline() -> None:
    duplicates, gaps = client_counts("duplicates"), client_counts("gaps")
    parts = Parts(stored=SessionPosition("old", 3, duplicates=2, gaps=1))
    parts.send(ack(12, duplicates=2, gaps=1))  # what the session had already reported: nothing new
    parts.send(ack(13, duplicates=5, gaps=1))
    parts.send(ack(14, duplicates=5, gaps=2))
    assert (client_counts("duplicates") - duplicates, client_counts("gaps") - gaps) == (3, 1)
    assert parts.stored() == SessionPosition(parts.hub.epoch, 14, duplicates=5, gaps=2)


def test_a_ping_is_answered_with_its_pong_and_any_frame_counts_as_heard() -> None:
    parts = Parts()
    before = parts.sender.timers.last_heard
    parts.send(encode_heartbeat(Ping(42)))
    assert [parse_server_frame(text) for text in parts.wire.replies] == [Pong(42)]
    assert parts.sender.timers.last_heard > before and parts.subscription.ended is None


def test_a_ping_that_cannot_be_answered_ends_the_connection_as_a_slow_consumer() -> None:
    parts = Parts(accepts_replies=False)
    parts.send(encode_heartbeat(Ping(1)))
    assert parts.subscription.ended == "slow_consumer"


def test_a_second_hello_or_a_bad_frame_ends_it_and_later_frames_are_ignored() -> None:
    for bad in (encode_hello(Hello(1, None, None, None)), "{not json", '{"type":"ack","seq":"x"}'):
        parts = Parts()
        parts.send(bad)
        assert parts.subscription.ended == "receiver" and isinstance(parts.receiver.error, ProtocolError)
        error = parts.receiver.error
        parts.send(ack(15))
        assert parts.receiver.error is error and parts.receiver.last_ack == 10
