"""The real-time relay's reading and committing (``spark/delivery/relay.py``) over fakes of the Kafka consumer and
the replay-log writer: every row committed once, in order, through a failed commit and a failed rewind (no row
read past without being committed), rows with an all-null key skipped, messages that are not rows written to
the dead-letter topic before the offsets move past them, and a fenced relay stopping its query."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import pytest

from sparkwire.replaylog import PositionedRecord
from sparkwire.replaylog.model import ChunkResult
from sparkwire.replaylog.writer import EpochFenced
from sparkwire.spark.delivery.relay import DeadLetters, NotARelayRow, Relay, positioned, relay_row
from sparkwire.spark.stream import StreamSpec

SPEC = StreamSpec(stream="feed", key="region", id_from=("topic", "partition", "offset"))


@dataclass
class Message:
    offset_: int
    body: bytes

    def error(self) -> None:
        return None

    def value(self) -> bytes:
        return self.body

    def offset(self) -> int:
        return self.offset_

    def topic(self) -> str:
        return "sparkwire-relay.feed"

    def partition(self) -> int:
        return 0

    def key(self) -> bytes:
        return b"orders/0"


@dataclass
class FakeProducer:
    """Takes what it is given, unless told to fail the next ``failing_flushes`` flushes."""

    written: list[tuple[str, bytes, dict[str, bytes]]] = field(default_factory=list)
    pending: list[tuple[str, bytes, dict[str, bytes]]] = field(default_factory=list)
    failing_flushes: int = 0

    def produce(self, topic: str, *, key: bytes, value: bytes, on_delivery: object,
                headers: list[tuple[str, bytes]]) -> None:
        self.pending.append((topic, value, dict(headers)))

    def flush(self, _timeout: float) -> int:
        if self.failing_flushes:
            self.failing_flushes -= 1
            left, self.pending = len(self.pending), []
            return left
        self.written += self.pending
        self.pending = []
        return 0


@dataclass
class Partition:
    offset: int


@dataclass
class FakeConsumer:
    """One partition: ``position`` is where the next read starts, ``committed_at`` what a commit saved."""

    messages: list[Message]
    position: int = 0
    committed_at: int = -1001  # librdkafka's "no committed offset"
    failing_rewinds: int = 0
    closed: bool = False

    def poll(self, _timeout: float) -> Message | None:
        if self.position >= len(self.messages):
            return None
        self.position += 1
        return self.messages[self.position - 1]

    def consume(self, count: int, _timeout: float) -> list[Message]:
        taken = self.messages[self.position:self.position + count]
        self.position += len(taken)
        return taken

    def commit(self, asynchronous: bool) -> None:
        self.committed_at = self.position

    def assignment(self) -> list[Partition]:
        return [Partition(self.position)]

    def committed(self, _partitions: list[Partition], timeout: float) -> list[Partition]:
        if self.failing_rewinds:
            self.failing_rewinds -= 1
            raise RuntimeError("the group coordinator is not available")
        return [Partition(self.committed_at)]

    def seek(self, partition: Partition) -> None:
        self.position = 0 if partition.offset < 0 else partition.offset  # OFFSET_BEGINNING is negative

    def close(self) -> None:
        self.closed = True


@dataclass
class FakeWriter:
    """Commits as commit_rows.lua does: a row at or below its source's last position is a duplicate."""

    failures: list[BaseException] = field(default_factory=list)
    log: list[str] = field(default_factory=list)
    positions: dict[str, tuple[int, int]] = field(default_factory=dict)

    def commit_rows(self, query_id: str, batch_id: int, rows: list[PositionedRecord], *,
                    fence: str = "") -> ChunkResult:
        if self.failures:
            raise self.failures.pop(0)
        first, appended = len(self.log) + 1, 0
        for row in rows:
            if (row.offset, row.index) <= self.positions.get(row.source, (-1, -1)):
                continue
            self.positions[row.source] = (row.offset, row.index)
            self.log.append(row.record.processing_id)
            appended += 1
        return ChunkResult("committed", "e1", first, len(self.log), appended, len(rows) - appended)


def message(offset: int, source_offset: int, region: str | None = "eu", index: int = 0) -> Message:
    row = {"s": "orders/0", "o": source_offset, "i": index, "r": {"region": region, "amount": 12}}
    return Message(offset, json.dumps(row).encode())


def decode(row: dict[str, object]) -> dict[str, object]:
    """As ``relay_decoder`` does for a schema of a string ``region`` and an integer ``amount``."""
    if not isinstance(row.get("amount"), int):
        raise TypeError(f"amount: an integer expected, not {row.get('amount')!r}")
    return dict(row)


def relay(consumer: FakeConsumer, writer: FakeWriter, producer: FakeProducer | None = None) -> Relay:
    letters = DeadLetters(producer or FakeProducer(), "sparkwire-relay.feed.dead-letter", flush_timeout_s=0)
    return Relay(consumer, writer, SPEC, decode, query_id="q", fence="e1",  # type: ignore[arg-type]
                 dead_letters=letters)


def test_a_row_is_named_by_its_source_position_and_keyed_by_the_streams_key() -> None:
    record = positioned(relay_row(message(0, 7, index=2).body), decode, SPEC.keys)  # type: ignore[arg-type]
    assert record is not None
    assert (record.source, record.offset, record.index) == ("orders/0", 7, 2)
    assert record.record.processing_id == "orders/0/7#2" and record.record.key == "eu"
    assert json.loads(record.record.payload)["processingId"] == "orders/0/7#2"
    assert positioned(relay_row(message(0, 8, region=None).body), decode, SPEC.keys) is None  # type: ignore[arg-type]


def test_rows_sent_again_are_refused_and_each_row_is_committed_once() -> None:
    consumer = FakeConsumer([message(i, o) for i, o in enumerate([0, 1, 2, 1, 2, 3])])  # Spark re-sent 1, 2
    writer = FakeWriter()
    r = relay(consumer, writer)
    while r.poll_once():
        pass
    assert writer.log == ["orders/0/0", "orders/0/1", "orders/0/2", "orders/0/3"]
    assert (r.committed, r.refused, consumer.committed_at) == (4, 2, 6)


def test_a_failed_commit_and_a_failed_rewind_read_nothing_past_the_committed_offsets() -> None:
    consumer = FakeConsumer([message(i, i) for i in range(3)])
    writer = FakeWriter(failures=[ConnectionError("redis down")])
    consumer.failing_rewinds = 1
    r = relay(consumer, writer)
    stops: list[BaseException] = []
    reads = iter([True, True, True, False])

    def active() -> bool:
        return next(reads, False)

    r.retry_delay_s = 0
    r.run(stops.append, active)
    assert writer.log == ["orders/0/0", "orders/0/1", "orders/0/2"], writer.log  # none lost, none twice
    assert stops == [] and consumer.closed


def test_a_fenced_relay_stops_its_query() -> None:
    consumer = FakeConsumer([message(0, 0)])
    r = relay(consumer, FakeWriter(failures=[EpochFenced("e1", "e2")]))
    stops: list[BaseException] = []
    r.run(stops.append, lambda: True)
    assert len(stops) == 1 and isinstance(stops[0], EpochFenced) and consumer.closed
    assert isinstance(r.error, EpochFenced)


@pytest.mark.parametrize("region", [None])
def test_rows_with_an_all_null_key_are_skipped_and_counted(region: str | None) -> None:
    consumer = FakeConsumer([message(0, 0, region=region), message(1, 1)])
    writer = FakeWriter()
    r = relay(consumer, writer)
    r.poll_once()
    assert writer.log == ["orders/0/1"] and r.skipped == 1 and consumer.committed_at == 2


NOT_ROWS = [
    b"not json at all",
    b"[1, 2]",
    json.dumps({"s": "orders/0", "o": 4, "i": 0}).encode(),  # no row
    json.dumps({"s": "orders/0", "o": "four", "i": 0, "r": {"region": "eu", "amount": 1}}).encode(),
    json.dumps({"s": "orders/0", "o": 4, "i": 0, "r": {"region": "eu", "amount": "12 EUR"}}).encode(),  # decode fails
]


@pytest.mark.parametrize("body", NOT_ROWS)
def test_a_message_that_is_not_a_row_is_refused_by_name(body: bytes) -> None:
    with pytest.raises(NotARelayRow):
        positioned(relay_row(body), decode, SPEC.keys)  # type: ignore[arg-type]


def test_messages_that_are_not_rows_go_to_the_dead_letter_topic_and_the_rows_after_them_on() -> None:
    bodies = [message(0, 0).body, *NOT_ROWS, message(0, 1).body]
    consumer = FakeConsumer([Message(offset, body) for offset, body in enumerate(bodies)])
    writer, producer = FakeWriter(), FakeProducer()
    r = relay(consumer, writer, producer)
    while r.poll_once():
        pass
    assert writer.log == ["orders/0/0", "orders/0/1"]
    assert [value for _topic, value, _headers in producer.written] == NOT_ROWS  # as they came, in order
    topic, _value, headers = producer.written[0]
    assert topic == "sparkwire-relay.feed.dead-letter"
    assert headers["sparkwire-relay-position"] == b"sparkwire-relay.feed/0/1" and headers["sparkwire-error"]
    assert r.dead == len(NOT_ROWS) and consumer.committed_at == len(bodies)


def test_a_dead_letter_not_taken_is_read_again_and_nothing_is_read_past_it() -> None:
    consumer = FakeConsumer([Message(0, message(0, 0).body), Message(1, b"{"), Message(2, message(0, 1).body)])
    writer, producer = FakeWriter(), FakeProducer(failing_flushes=1)
    r = relay(consumer, writer, producer)
    with pytest.raises(RuntimeError, match="not written"):
        r.poll_once()
    assert consumer.committed_at == -1001 and writer.log == []  # neither its offset nor the rows moved on
    r.retry_delay_s = 0
    r._rewind()
    reads = iter([True, True, True, False])
    stops: list[BaseException] = []
    r.run(stops.append, lambda: next(reads, False))
    assert writer.log == ["orders/0/0", "orders/0/1"], writer.log
    assert [value for _topic, value, _headers in producer.written] == [b"{"]
    assert stops == [] and consumer.committed_at == 3
