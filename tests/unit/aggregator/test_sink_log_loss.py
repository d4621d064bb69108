"""The sink's order when the log is lost: the history before the batch is rebuilt first, then the batch
is committed fenced on the rebuilt epoch; an epoch this query already wrote to is adopted, not rebuilt."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from sparkwire.aggregator.faults import FaultInjector
from sparkwire.aggregator.sink import ReplayLogSink
from sparkwire.replaylog import BatchCommit, ChunkResult, Record
from sparkwire.replaylog.writer import EpochFenced


@dataclass
class FakeWriter:
    """The commit script's fence and epoch creation, in memory."""

    epoch: str = ""
    query: str = ""
    calls: list[tuple[str, int, str]] = field(default_factory=list)
    created: int = 0

    def stream_epoch(self) -> tuple[str, str]:
        return self.epoch, self.query

    def commit_batch(self, query_id: str, batch_id: int, records: Sequence[Record], *,
                     between_chunks: Callable[[int, ChunkResult], None] | None = None,
                     fence: str = "") -> BatchCommit:
        if fence and fence != self.epoch:
            raise EpochFenced(fence, self.epoch)
        if not self.epoch:
            self.created += 1
            self.epoch = f"e{self.created}"
        self.query = query_id
        self.calls.append((query_id, batch_id, self.epoch))
        return BatchCommit(batch_id, (ChunkResult("committed", self.epoch, 1, len(records), len(records), 0),))


@dataclass
class Rebuilt:
    epoch: str


@dataclass
class FakeRebuilder:
    calls: list[int] = field(default_factory=list)

    def __call__(self, spark: Any, writer: Any, upto: int | None = None) -> Rebuilt:
        assert upto is not None
        self.calls.append(upto)
        writer.created += 1
        writer.epoch = f"e{writer.created}"
        writer.commit_batch("rebuild:q", upto - 1, [], fence=writer.epoch)
        return Rebuilt(writer.epoch)


class Batch:
    sparkSession = object()

    def collect(self) -> list[Any]:
        return []


def make_sink(writer: FakeWriter) -> tuple[ReplayLogSink, FakeRebuilder]:
    rebuilder = FakeRebuilder()
    sink = ReplayLogSink(writer, FaultInjector(None), rebuilder)  # type: ignore[arg-type]
    sink.bind_query("q")
    return sink, rebuilder


def test_a_log_lost_under_a_running_query_is_rebuilt_before_the_batch_is_committed() -> None:
    writer = FakeWriter()
    sink, rebuilder = make_sink(writer)
    sink(Batch(), 0)
    sink(Batch(), 1)
    writer.epoch, writer.query = "", ""  # FLUSHALL
    sink(Batch(), 2)
    assert rebuilder.calls == [2]
    assert writer.calls == [("q", 0, "e1"), ("q", 1, "e1"), ("rebuild:q", 1, "e2"), ("q", 2, "e2")]


def test_a_driver_starting_on_a_checkpoint_with_batches_and_no_log_rebuilds_first() -> None:
    writer = FakeWriter()
    sink, rebuilder = make_sink(writer)
    sink(Batch(), 7)
    assert rebuilder.calls == [7] and writer.calls[-1] == ("q", 7, "e1")


def test_a_fresh_stream_and_an_existing_epoch_need_no_rebuild() -> None:
    writer = FakeWriter()
    sink, rebuilder = make_sink(writer)
    sink(Batch(), 0)
    restarted, rebuilder2 = make_sink(writer)
    restarted(Batch(), 5)
    assert rebuilder.calls == rebuilder2.calls == []


def test_an_epoch_this_query_already_wrote_to_is_adopted() -> None:
    writer = FakeWriter()
    sink, rebuilder = make_sink(writer)
    sink(Batch(), 0)
    writer.epoch, writer.query = "e9", "rebuild:q"  # an operator's sparkwire rebuild ran meanwhile
    sink(Batch(), 1)
    assert rebuilder.calls == [] and writer.calls[-1] == ("q", 1, "e9")
