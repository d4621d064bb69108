"""The metrics job's sink: the open windows follow the batches the log holds — a batch whose commit failed,
given again (by the same driver or a restarted one), closes the same windows with the same counts."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from sparkwire.aggregator import closing_sink
from sparkwire.aggregator.closing_sink import WindowClosingSink
from sparkwire.aggregator.job import metrics_spec
from sparkwire.aggregator.pipeline import WINDOW_SCHEMA
from sparkwire.aggregator.window_state import WindowStateFiles
from sparkwire.replaylog import BatchCommit, ChunkResult, Record
from sparkwire.spark.delivery.faults import FaultInjector
from sparkwire.spark.results.records import ResultEncoder

QUERY = "3f0c-query"


@dataclass
class Row:
    values: dict[str, Any]

    def asDict(self) -> dict[str, Any]:
        return self.values


def row(end: int, metric: str | None, latest: int, value: float = 1.0) -> Row:
    return Row({"windowEnd": end, "metricName": metric, "latestMs": latest, "count": 1, "sum": value,
                "min": value, "max": value})


@dataclass
class Collected:
    rows: list[Row]

    def collect(self) -> list[Row]:
        return self.rows


@dataclass
class Writer:
    """Commits in memory; ``fail_batches`` raise once each, as a lost connection would."""

    committed: dict[int, list[Record]] = field(default_factory=dict)
    fail_batches: set[int] = field(default_factory=set)

    def stream_epoch(self) -> tuple[str, str]:
        return "e1", QUERY

    def commit_batch(self, query_id: str, batch_id: int, records: Sequence[Record], *,
                     between_chunks: Callable[[int, ChunkResult], None] | None = None, fence: str = "",
                     ordered: bool = False, consecutive: bool = True) -> BatchCommit:
        if batch_id in self.fail_batches:
            self.fail_batches.discard(batch_id)
            raise ConnectionError("the connection dropped")
        status = "replayed" if batch_id in self.committed else "committed"
        self.committed.setdefault(batch_id, list(records))
        return BatchCommit(batch_id, (ChunkResult(status, "e1", 1, len(records), len(records), 0),))


BATCHES = {
    0: [row(10_000, "cpu", 9_000, 1.0), row(10_000, None, 9_500)],
    1: [row(10_000, "cpu", 9_900, 2.0), row(20_000, "cpu", 14_000, 4.0)],
    2: [row(20_000, "cpu", 15_500, 8.0), row(30_000, None, 20_000)],  # 15,500 - 5,000 closes 10,000
}


def new_sink(tmp_path: Path, writer: Writer, monkeypatch: pytest.MonkeyPatch) -> WindowClosingSink:
    monkeypatch.setattr(closing_sink.pipeline, "batch_partials", lambda batch, _window_ms: Collected(BATCHES[batch]))
    encoder = ResultEncoder(metrics_spec("metrics"), WINDOW_SCHEMA)
    sink = WindowClosingSink(writer, encoder, FaultInjector(None),
                             states=WindowStateFiles(tmp_path, 10_000, 5_000))
    sink.bind_query(QUERY)
    return sink


def closed(writer: Writer) -> list[tuple[int, int, int, float]]:
    return [(batch_id, json.loads(r.payload)["windowEnd"], json.loads(r.payload)["count"],
             json.loads(r.payload)["sum"]) for batch_id, records in sorted(writer.committed.items()) for r in records]


def test_a_window_is_committed_by_the_batch_that_passes_its_end_plus_the_delay(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    writer = Writer()
    sink = new_sink(tmp_path, writer, monkeypatch)
    for batch_id in BATCHES:
        sink(batch_id, batch_id)
    assert closed(writer) == [(2, 10_000, 2, 3.0)]
    assert WindowStateFiles(tmp_path, 10_000, 5_000).closed_upto() == {0: 4_500, 1: 9_000, 2: 15_000}


def test_a_batch_whose_commit_failed_is_given_again_and_counts_once(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    writer = Writer(fail_batches={1})
    sink = new_sink(tmp_path, writer, monkeypatch)
    sink(0, 0)
    with pytest.raises(ConnectionError):
        sink(1, 1)
    sink(1, 1)  # the same driver, batch 1 again: from the state after batch 0, not after the failed try
    sink(2, 2)
    assert closed(writer) == [(2, 10_000, 2, 3.0)]


def test_a_restarted_driver_resumes_from_the_checkpoint_and_a_replayed_batch_changes_nothing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    writer = Writer()
    first = new_sink(tmp_path, writer, monkeypatch)
    for batch_id in (0, 1, 2):
        first(batch_id, batch_id)
    again = new_sink(tmp_path, writer, monkeypatch)  # Spark re-runs batch 2: its commit was not recorded
    again(2, 2)
    assert closed(writer) == [(2, 10_000, 2, 3.0)]
    state = WindowStateFiles(tmp_path, 10_000, 5_000).load_before(3, QUERY)
    assert {key: vars(a) for key, a in state.open.items()} == {
        (20_000, "cpu"): {"count": 2, "sum": 12.0, "min": 4.0, "max": 8.0}}


def partition_row(end: int, metric: str | None, latest: int, partition: int, count: int = 1) -> Row:
    return Row({"windowEnd": end, "metricName": metric, "latestMs": latest, "count": count, "sum": float(count),
                "min": 1.0, "max": 1.0, "partition": partition})


LAGGING = {
    0: [partition_row(10_000, "cpu", 9_000, 0), partition_row(10_000, "cpu", 9_500, 1)],
    1: [partition_row(20_000, "cpu", 19_999, 0), partition_row(30_000, "cpu", 29_999, 0)],  # 1 lags
    2: [partition_row(10_000, "cpu", 9_900, 1, count=4), partition_row(30_000, None, 30_000, 1)],
}


def lagging_sink(tmp_path: Path, writer: Writer, monkeypatch: pytest.MonkeyPatch, batches: dict[int, list[Row]],
                 idle_ms: int | None) -> WindowClosingSink:
    monkeypatch.setattr(closing_sink.pipeline, "batch_partials", lambda batch, _window_ms: Collected(batches[batch]))
    sink = WindowClosingSink(writer, ResultEncoder(metrics_spec("metrics"), WINDOW_SCHEMA), FaultInjector(None),
                             states=WindowStateFiles(tmp_path, 10_000, 5_000), idle_ms=idle_ms)
    sink.bind_query(QUERY)
    return sink


def test_a_lagging_partition_holds_the_window_until_its_events_are_in(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    writer = Writer()
    sink = lagging_sink(tmp_path, writer, monkeypatch, LAGGING, idle_ms=60_000)
    late_before = closing_sink.LATE_EVENTS._value.get()
    for batch_id in LAGGING:
        sink(batch_id, batch_id)
    assert closed(writer) == [(2, 10_000, 6, 6.0), (2, 20_000, 1, 1.0)]
    assert closing_sink.LATE_EVENTS._value.get() == late_before


def test_a_partition_silent_for_the_idle_time_is_logged_once_and_its_late_events_counted(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    clock = iter([0.0, 1.0, 100.0, 101.0])
    batches = {
        0: [partition_row(10_000, "cpu", 9_000, 0), partition_row(10_000, "cpu", 9_500, 1)],
        1: [partition_row(20_000, "cpu", 19_999, 0)],  # partition 1 silent from here (1 s)
        2: [partition_row(30_000, "cpu", 29_999, 0)],  # 100 s: idle, windows close without it
        3: [partition_row(10_000, "cpu", 9_900, 1, count=4), partition_row(30_000, "cpu", 29_999, 0)],
    }
    writer = Writer()
    sink = lagging_sink(tmp_path, writer, monkeypatch, batches, idle_ms=60_000)
    sink.clock = lambda: next(clock)
    late_before = closing_sink.LATE_EVENTS._value.get()
    with caplog.at_level("INFO", logger=closing_sink.__name__):
        for batch_id in batches:
            sink(batch_id, batch_id)
    assert closed(writer) == [(2, 10_000, 2, 2.0), (2, 20_000, 1, 1.0)]
    assert closing_sink.LATE_EVENTS._value.get() == late_before + 4
    idle_lines = [r for r in caplog.records if "idle" in r.getMessage()]
    assert len(idle_lines) == 1 and "partition 1" in idle_lines[0].getMessage()
    # A re-run of batch 2 by a restarted driver decides at the time its first run recorded, not now.
    again = lagging_sink(tmp_path, writer, monkeypatch, batches, idle_ms=60_000)
    again.clock = lambda: 2.0  # what a fresh decision would take: partition 1 not idle yet
    again(2, 2)
    assert WindowStateFiles(tmp_path, 10_000, 5_000).closed_upto()[2] == 24_999
