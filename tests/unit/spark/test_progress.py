from __future__ import annotations

from types import SimpleNamespace

import pytest
from prometheus_client import REGISTRY

from sparkwire.spark.progress import DEADLETTER_OBSERVATION, DEADLETTER_QUERY, ProgressReporter, offsets_behind


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
