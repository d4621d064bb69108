from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

import pytest
from prometheus_client import REGISTRY
from pyspark.sql.streaming.listener import QueryProgressEvent

from sparkwire.spark.runtime.progress import (
    DEADLETTER_OBSERVATION,
    DEADLETTER_QUERY,
    ProgressReporter,
    _ProgressAsJson,
    offsets_behind,
)


def progress(*source_metrics: dict[str, str] | None) -> SimpleNamespace:
    return SimpleNamespace(sources=[SimpleNamespace(metrics=m) for m in source_metrics])


def test_offsets_behind_is_the_largest_over_the_kafka_sources() -> None:
    assert offsets_behind(progress({"maxOffsetsBehindLatest": "12", "avgOffsetsBehindLatest": "6.0"},
                                   {"maxOffsetsBehindLatest": "40.0"})) == 40


def test_offsets_behind_is_none_until_a_source_reports_it() -> None:
    assert offsets_behind(progress({}, None)) is None
    assert offsets_behind(SimpleNamespace(sources=None)) is None
    assert offsets_behind(progress({"maxOffsetsBehindLatest": "0"})) == 0


def query_progress(name: str, rows: int, observed: dict[str, dict[str, int]] | None) -> SimpleNamespace:
    return SimpleNamespace(name=name, batchId=3, numInputRows=rows, batchDuration=120, eventTime={},
                           durationMs={"addBatch": 100}, sources=[], observedMetrics=observed,
                           stateOperators=[])


def counted(name: str) -> float:
    return REGISTRY.get_sample_value(name) or 0.0


@pytest.mark.parametrize("query", [DEADLETTER_QUERY, "sparkwire-aggregate"])
def test_malformed_records_are_counted_from_whichever_query_observes_them(query: str) -> None:
    """The dead-letter query observes what it routes; without it, the metrics query observes what it skips."""
    malformed, rows = counted("sparkwire_aggregator_malformed_records_total"), counted(
        "sparkwire_aggregator_input_rows_total")
    ProgressReporter().onQueryProgress(SimpleNamespace(
        progress=query_progress(query, 50, {DEADLETTER_OBSERVATION: {"malformed": 7}})))
    assert counted("sparkwire_aggregator_malformed_records_total") == malformed + 7
    # Only the delivered query's rows are its input; the dead-letter query reads the same records again.
    assert counted("sparkwire_aggregator_input_rows_total") == rows + (0 if query == DEADLETTER_QUERY else 50)


def test_a_query_that_observes_nothing_counts_no_malformed_record() -> None:
    before = counted("sparkwire_aggregator_malformed_records_total")
    ProgressReporter().onQueryProgress(SimpleNamespace(progress=query_progress("orders", 10, None)))
    assert counted("sparkwire_aggregator_malformed_records_total") == before


# A progress event as Spark 4.2 writes it (QueryProgressEvent.json), trimmed to what the reporter reads.
PROGRESS_EVENT_JSON = json.dumps({"progress": {
    "id": "6f5e1cba-37a5-4c84-9ae4-0a4bd8d0a8c5", "runId": "1c2b43e1-86e4-4a38-a3a4-5c2b1b7c1e21",
    "name": "sparkwire-aggregate", "timestamp": "2026-11-26T12:00:00.000Z", "batchId": 12,
    "batchDuration": 812, "numInputRows": 10000, "processedRowsPerSecond": 12315.3,
    "durationMs": {"addBatch": 607, "queryPlanning": 71, "walCommit": 52},
    "eventTime": {"watermark": "2026-11-26T11:59:50.000Z"},
    "stateOperators": [
        {"operatorName": "dedupeWithinWatermark", "numRowsTotal": 9000, "numRowsUpdated": 10000,
         "allUpdatesTimeMs": 5, "numRowsRemoved": 1000, "allRemovalsTimeMs": 1, "commitTimeMs": 9,
         "memoryUsedBytes": 1, "numRowsDroppedByWatermark": 4, "numShufflePartitions": 2,
         "numStateStoreInstances": 2, "customMetrics": {"numDroppedDuplicateRows": 3}},
        {"operatorName": "stateStoreSave", "numRowsTotal": 100, "numRowsUpdated": 50, "allUpdatesTimeMs": 2,
         "numRowsRemoved": 50, "allRemovalsTimeMs": 1, "commitTimeMs": 8, "memoryUsedBytes": 1,
         "numRowsDroppedByWatermark": 0, "numShufflePartitions": 2, "numStateStoreInstances": 2,
         "customMetrics": {}}],
    # A source's first batch: no start offset, and its NaN rates left out.
    "sources": [{"description": "KafkaV2[Subscribe[metrics]]", "endOffset": {"metrics": {"0": 2}},
                 "latestOffset": {"metrics": {"0": 9}}, "numInputRows": 10000,
                 "metrics": {"maxOffsetsBehindLatest": "7"}}],
    "sink": {"description": "ForeachBatchSink", "numOutputRows": -1},
    "observedMetrics": {DEADLETTER_OBSERVATION: {"malformed": 5}},
}})


def test_progress_reaches_the_reporter_from_the_events_json_with_everything_it_counts() -> None:
    """The JVM-side listener hands over the event's JSON (one py4j call), parsed into pyspark's objects."""
    before = {name: counted(name) for name in (
        "sparkwire_aggregator_malformed_records_total", "sparkwire_aggregator_input_rows_total")}
    reporter = ProgressReporter()
    received: list[Any] = []
    reporter.onQueryProgress = received.append  # type: ignore[method-assign]
    _ProgressAsJson(reporter).onQueryProgress(SimpleNamespace(json=lambda: PROGRESS_EVENT_JSON))
    ProgressReporter().onQueryProgress(received[0])
    progress = received[0].progress
    assert (progress.batchId, progress.numInputRows, progress.durationMs["addBatch"]) == (12, 10000, 607)
    assert offsets_behind(progress) == 7
    assert sum(op.numRowsDroppedByWatermark for op in progress.stateOperators) == 4
    assert counted("sparkwire_aggregator_malformed_records_total") == before[
        "sparkwire_aggregator_malformed_records_total"] + 5
    assert counted("sparkwire_aggregator_input_rows_total") == before["sparkwire_aggregator_input_rows_total"] + 10000


def test_progress_json_this_pyspark_cannot_read_is_converted_field_by_field(monkeypatch: pytest.MonkeyPatch) -> None:
    jevent = SimpleNamespace(json=lambda: json.dumps({"progress": {"name": "x"}}))
    converted = SimpleNamespace(progress=query_progress("orders", 3, None))
    monkeypatch.setattr(QueryProgressEvent, "fromJObject", lambda event: converted if event is jevent else None)
    received: list[Any] = []
    reporter = ProgressReporter()
    reporter.onQueryProgress = received.append  # type: ignore[method-assign]
    _ProgressAsJson(reporter).onQueryProgress(jevent)
    assert received == [converted]
