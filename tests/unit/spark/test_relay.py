"""The real-time relay's reading and committing (``spark/delivery/relay.py``) over fakes of the Kafka consumer and
the replay-log writer: every row committed once, in order, through a failed commit and a failed rewind (no row
read past without being committed), rows with an all-null key skipped, and a fenced relay stopping its query."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import pytest

from sparkwire.replaylog import PositionedRecord
from sparkwire.replaylog.model import ChunkResult
from sparkwire.replaylog.writer import EpochFenced
from sparkwire.spark.delivery.relay import Relay, positioned, relay_row
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


def relay(consumer: FakeConsumer, writer: FakeWriter) -> Relay:
    return Relay(consumer, writer, SPEC, lambda row: dict(row), query_id="q", fence="e1")  # type: ignore[arg-type]


def test_a_row_is_named_by_its_source_position_and_keyed_by_the_streams_key() -> None:
    record = positioned(relay_row(message(0, 7, index=2).body), lambda row: dict(row), SPEC.keys)
    assert record is not None
    assert (record.source, record.offset, record.index) == ("orders/0", 7, 2)
    assert record.record.processing_id == "orders/0/7#2" and record.record.key == "eu"
    assert json.loads(record.record.payload)["processingId"] == "orders/0/7#2"
    assert positioned(relay_row(message(0, 8, region=None).body), lambda row: dict(row), SPEC.keys) is None


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
