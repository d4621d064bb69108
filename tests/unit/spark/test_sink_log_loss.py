"""The sink's order when the log is lost: the history before the batch is rebuilt first, then the batch
is committed fenced on the rebuilt epoch; an epoch this query already wrote to is adopted, not rebuilt;
without a rebuilder the loss is marked in a new epoch, never silent; the descriptor is written again.
A log that lost its tail (same epoch, the marker behind) gets a new epoch and a rebuild too."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest
from pyspark.sql.types import StringType, StructField, StructType

from sparkwire.replaylog import BatchCommit, ChunkResult, Record
from sparkwire.replaylog.writer import EpochFenced, TailLost
from sparkwire.spark import metrics
from sparkwire.spark.delivery.faults import FaultInjector
from sparkwire.spark.delivery.sink import ReplayLogSink
from sparkwire.spark.results.records import ResultEncoder
from sparkwire.spark.stream import StreamSpec


@dataclass
class FakeWriter:
    """The commit script's fence and epoch creation, in memory."""

    epoch: str = ""
    query: str = ""
    calls: list[tuple[str, int, str]] = field(default_factory=list)
    created: int = 0
    descriptors: list[str] = field(default_factory=list)
    lost_marks: list[int | None] = field(default_factory=list)
    last_batch: int = -1

    def put_descriptor(self, document: str) -> None:
        self.descriptors.append(document)

    def mark_rebuild(self, lost_before_ms: int | None, lost_records: int, *, lost_tail_of: str = "") -> str:
        self.lost_marks.append(lost_before_ms)
        if lost_tail_of and self.epoch == lost_tail_of:
            self.epoch, self.query, self.last_batch = "", "", -1  # mark_rebuild.lua drops the marker too
        if not self.epoch:
            self.created += 1
            self.epoch = f"e{self.created}"
        return self.epoch

    def stream_epoch(self) -> tuple[str, str]:
        return self.epoch, self.query

    def commit_batch(self, query_id: str, batch_id: int, records: Sequence[Record], *,
                     between_chunks: Callable[[int, ChunkResult], None] | None = None,
                     fence: str = "", ordered: bool = False, consecutive: bool = True) -> BatchCommit:
        if fence and fence != self.epoch:
            raise EpochFenced(fence, self.epoch)
        if consecutive and query_id == self.query and self.last_batch >= 0 and batch_id > self.last_batch + 1:
            raise TailLost(self.epoch, self.last_batch, batch_id)
        if not self.epoch:
            self.created += 1
            self.epoch = f"e{self.created}"
        self.query, self.last_batch = query_id, batch_id
        self.calls.append((query_id, batch_id, self.epoch))
        return BatchCommit(batch_id, (ChunkResult("committed", self.epoch, 1, len(records), len(records), 0),))


@dataclass
class Rebuilt:
    epoch: str


@dataclass
class FakeRebuilder:
    calls: list[int] = field(default_factory=list)
    lost_tails: list[str] = field(default_factory=list)

    def __call__(self, spark: Any, writer: Any, upto: int | None = None, lost_tail_of: str = "") -> Rebuilt:
        assert upto is not None
        self.calls.append(upto)
        self.lost_tails.append(lost_tail_of)
        writer.created += 1
        writer.epoch = f"e{writer.created}"
        writer.commit_batch("rebuild:q", upto - 1, [], fence=writer.epoch, consecutive=False)
        return Rebuilt(writer.epoch)


SCHEMA = StructType([StructField("processingId", StringType()), StructField("k", StringType())])
ENCODER = ResultEncoder(StreamSpec(stream="s", key="k", id_column="processingId"), SCHEMA)


class Batch:
    sparkSession = object()
    schema = SCHEMA

    def collect(self) -> list[Any]:
        return []


def make_sink(writer: FakeWriter, *, rebuild: bool = True) -> tuple[ReplayLogSink, FakeRebuilder]:
    rebuilder = FakeRebuilder()
    sink = ReplayLogSink(writer, ENCODER, FaultInjector(None), rebuilder if rebuild else None,  # type: ignore[arg-type]
                         descriptor='{"stream":"s"}', rebuild_unavailable="given as a DataFrame")
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


def test_a_driver_starting_on_a_lost_log_rebuilds_it_before_any_batch_comes() -> None:
    writer = FakeWriter()
    sink, rebuilder = make_sink(writer)
    sink.rebuild_if_lost(object(), -1)  # a new checkpoint: nothing was lost
    assert rebuilder.calls == [] and writer.epoch == ""
    sink.rebuild_if_lost(object(), 6)  # a restart after batch 6 with no epoch: lost while the driver was down
    assert rebuilder.calls == [7] and writer.calls == [("rebuild:q", 6, "e1")]
    sink(Batch(), 7)  # the next batch is fenced on the rebuilt epoch, not rebuilt again
    assert rebuilder.calls == [7] and writer.calls[-1] == ("q", 7, "e1")


def test_a_driver_starting_on_a_log_that_is_there_leaves_it_to_its_first_batch() -> None:
    writer = FakeWriter()
    sink, _ = make_sink(writer)
    sink(Batch(), 0)
    restarted, rebuilder = make_sink(writer)
    restarted.rebuild_if_lost(object(), 0)
    restarted(Batch(), 1)
    assert rebuilder.calls == [] and writer.calls == [("q", 0, "e1"), ("q", 1, "e1")]


def test_a_fresh_stream_and_an_existing_epoch_need_no_rebuild() -> None:
    writer = FakeWriter()
    sink, rebuilder = make_sink(writer)
    sink(Batch(), 0)
    restarted, rebuilder2 = make_sink(writer)
    restarted(Batch(), 1)
    assert rebuilder.calls == rebuilder2.calls == []


def test_an_epoch_this_query_already_wrote_to_is_adopted() -> None:
    writer = FakeWriter()
    sink, rebuilder = make_sink(writer)
    sink(Batch(), 0)
    writer.epoch, writer.query = "e9", "rebuild:q"  # an operator's sparkwire rebuild ran meanwhile
    sink(Batch(), 1)
    assert rebuilder.calls == [] and writer.calls[-1] == ("q", 1, "e9")


def test_a_log_lost_without_a_rebuilder_is_marked_lost_in_a_new_epoch_and_the_descriptor_written_again(
        caplog: pytest.LogCaptureFixture) -> None:
    writer = FakeWriter()
    sink, _ = make_sink(writer, rebuild=False)
    sink(Batch(), 0)
    assert writer.descriptors == ['{"stream":"s"}'] and writer.lost_marks == []
    writer.epoch, writer.query = "", ""  # FLUSHALL
    sink(Batch(), 1)
    assert len(writer.lost_marks) == 1 and writer.lost_marks[0] is not None  # history_lost before now
    assert writer.calls[-1] == ("q", 1, "e2")
    assert writer.descriptors == ['{"stream":"s"}'] * 2
    assert "cannot be rebuilt: given as a DataFrame" in caplog.text


def test_a_log_that_lost_its_tail_in_a_failover_gets_a_new_epoch_and_a_rebuild_before_the_batch() -> None:
    writer = FakeWriter()
    sink, rebuilder = make_sink(writer)
    sink(Batch(), 0)
    sink(Batch(), 1)
    sink(Batch(), 2)
    writer.last_batch = 0  # the promoted replica had batch 0 only; the epoch is the same
    before = metrics.TAIL_LOSSES._value.get()
    sink(Batch(), 3)
    assert rebuilder.calls == [3] and rebuilder.lost_tails == ["e1"]
    assert writer.calls[-2:] == [("rebuild:q", 2, "e2"), ("q", 3, "e2")]
    assert metrics.TAIL_LOSSES._value.get() == before + 1


def test_a_lost_tail_without_a_rebuilder_is_marked_lost_in_a_new_epoch(caplog: pytest.LogCaptureFixture) -> None:
    writer = FakeWriter()
    sink, _ = make_sink(writer, rebuild=False)
    sink(Batch(), 0)
    sink(Batch(), 1)
    writer.last_batch = 0  # batch 1 was lost in a failover, under the same epoch
    sink(Batch(), 2)
    assert writer.epoch == "e2" and len(writer.lost_marks) == 1 and writer.lost_marks[0] is not None
    assert writer.calls[-1] == ("q", 2, "e2")
    assert "lost its tail" in caplog.text
