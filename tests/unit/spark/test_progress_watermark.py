"""Rows Spark's watermark dropped, per delivered query, from its progress (``numRowsDroppedByWatermark``)."""

from __future__ import annotations

from typing import Any

from prometheus_client import REGISTRY
from pyspark.sql.streaming.listener import QueryProgressEvent

from sparkwire.spark.runtime.progress import DEADLETTER_QUERY, ProgressReporter, query_label, rows_dropped_by_watermark


def event(name: str | None, dropped: list[int], rows: int = 500) -> Any:
    """A progress event as Spark 4.2 writes it (trimmed): one state operator per count in ``dropped``."""
    operator = {"numRowsTotal": 10, "numRowsUpdated": 5, "allUpdatesTimeMs": 1, "numRowsRemoved": 0,
                "allRemovalsTimeMs": 0, "commitTimeMs": 1, "memoryUsedBytes": 1, "numShufflePartitions": 2,
                "numStateStoreInstances": 2, "customMetrics": {}}
    return QueryProgressEvent.fromJson({"progress": {
        "id": "0d1d3b52-8f55-4a1c-9b57-51b0d0a3b9a1", "runId": "7b6f3b61-2d9c-4e79-bb4a-6a2b9d9c0a10",
        "name": name, "timestamp": "2026-11-28T07:00:00.000Z", "batchId": 7, "batchDuration": 300,
        "numInputRows": rows, "inputRowsPerSecond": 100.0, "processedRowsPerSecond": 100.0,
        "durationMs": {"addBatch": 200}, "eventTime": {"watermark": "2026-11-28T06:59:50.000Z"},
        "stateOperators": [{"operatorName": f"op{i}", "numRowsDroppedByWatermark": n, **operator}
                           for i, n in enumerate(dropped)],
        "sources": [], "sink": {"description": "ForeachBatchSink", "numOutputRows": -1}, "observedMetrics": {},
    }})


def sample(name: str, query: str) -> float:
    return REGISTRY.get_sample_value(name, {"query": query}) or 0.0


def test_rows_dropped_by_the_watermark_are_counted_per_query() -> None:
    dropped, rows = (sample(n, "page-views") for n in ("sparkwire_query_rows_dropped_by_watermark_total",
                                                       "sparkwire_query_input_rows_total"))
    other = sample("sparkwire_query_rows_dropped_by_watermark_total", "orders")
    reporter = ProgressReporter()
    reporter.onQueryProgress(event("page-views", [37, 5], rows=500))
    reporter.onQueryProgress(event("page-views", [0, 0], rows=200))
    assert sample("sparkwire_query_rows_dropped_by_watermark_total", "page-views") == dropped + 42
    assert sample("sparkwire_query_input_rows_total", "page-views") == rows + 700
    assert sample("sparkwire_query_rows_dropped_by_watermark_total", "orders") == other  # per query


def test_an_unnamed_query_is_labelled_by_its_id_and_the_dead_letter_query_is_not_counted() -> None:
    progress = event(None, [3]).progress
    assert query_label(progress) == "0d1d3b52-8f55-4a1c-9b57-51b0d0a3b9a1"
    assert rows_dropped_by_watermark(progress) == 3
    before = sample("sparkwire_query_rows_dropped_by_watermark_total", DEADLETTER_QUERY)
    ProgressReporter().onQueryProgress(event(DEADLETTER_QUERY, [9]))
    assert sample("sparkwire_query_rows_dropped_by_watermark_total", DEADLETTER_QUERY) == before
    assert rows_dropped_by_watermark(event("stateless", []).progress) == 0
