"""Open windows: partial aggregates merged, windows closed by the batch whose events pass end + delay."""

from __future__ import annotations

import hashlib

import pytest

from sparkwire.aggregator.windows import Aggregate, OpenWindows, Partial, partial_from_row, processing_id

W, DELAY = 10_000, 5_000


def part(end: int, metric: str | None, latest: int, count: int = 1, total: float = 1.0, low: float = 1.0,
         high: float = 1.0) -> Partial:
    return Partial(end, metric, latest, None if metric is None else Aggregate(count, total, low, high))


def test_a_window_closes_in_the_batch_that_reads_an_event_past_its_end_plus_the_delay() -> None:
    state = OpenWindows(W, DELAY)
    assert state.advance([part(10_000, "cpu", 9_000, 2, 5.0, 1.0, 4.0)]).closed == []
    assert state.advance([part(20_000, "cpu", 14_999)]).closed == []  # 14,999 - 5,000 < 10,000
    closed = state.advance([part(20_000, "cpu", 15_000)]).closed
    assert [row["windowEnd"] for row in closed] == [10_000]
    assert closed[0] == {"processingId": processing_id(10_000, "cpu"), "metricName": "cpu", "windowStart": 0,
                         "windowEnd": 10_000, "count": 2, "sum": 5.0, "min": 1.0, "max": 4.0, "avg": 2.5}
    assert state.closed_upto == 10_000 and list(state.open) == [(20_000, "cpu")]


def test_partials_of_one_window_from_several_batches_are_merged() -> None:
    state = OpenWindows(W, DELAY)
    state.advance([part(10_000, "cpu", 1_000, 2, 3.0, 1.0, 2.0)])
    state.advance([part(10_000, "cpu", 2_000, 1, -4.0, -4.0, -4.0), part(10_000, "mem", 2_000, 1, 7.0, 7.0, 7.0)])
    closed = state.advance([part(30_000, None, 25_000, 3)]).closed  # a heartbeat group moves event time only
    assert [(r["metricName"], r["count"], r["sum"], r["min"], r["max"]) for r in closed] == [
        ("cpu", 3, -1.0, -4.0, 2.0), ("mem", 1, 7.0, 7.0, 7.0)]
    assert state.open == {}


def test_several_windows_closed_at_once_come_in_window_then_metric_order() -> None:
    state = OpenWindows(W, DELAY)
    state.advance([part(20_000, "b", 11_000), part(10_000, "z", 9_000), part(10_000, "a", 9_500)])
    closed = state.advance([part(40_000, "a", 35_000)]).closed
    assert [(r["windowEnd"], r["metricName"]) for r in closed] == [(10_000, "a"), (10_000, "z"), (20_000, "b")]


def test_the_bound_never_goes_back_and_a_window_closed_before_gets_nothing() -> None:
    state = OpenWindows(W, DELAY)
    state.advance([part(20_000, "cpu", 16_000)])
    assert state.closed_upto == 11_000
    advanced = state.advance([part(10_000, "cpu", 9_000)])  # Spark would have dropped it as late
    assert (advanced.closed, advanced.after_close, state.closed_upto) == ([], 1, 11_000)
    assert (10_000, "cpu") not in state.open


def test_the_state_survives_its_document() -> None:
    state = OpenWindows(W, DELAY)
    state.advance([part(20_000, "cpu", 12_345, 2, 0.1, -0.5, 0.6), part(20_000, "é", 12_000)])
    again = OpenWindows.from_document(state.to_document())
    assert again == state
    empty = OpenWindows(W, DELAY)
    assert OpenWindows.from_document(empty.to_document()) == empty


def test_processing_ids_are_sha1_of_window_end_and_metric() -> None:
    assert processing_id(20_000, "cpu") == hashlib.sha1(b"20000-cpu").hexdigest()


def test_rows_become_partials_and_a_non_finite_aggregate_is_refused() -> None:
    row = {"windowEnd": 10_000, "metricName": "cpu", "latestMs": 9_999, "count": 2, "sum": 3.0, "min": 1.0,
           "max": 2.0}
    assert partial_from_row(row) == part(10_000, "cpu", 9_999, 2, 3.0, 1.0, 2.0)
    heartbeat = {**row, "metricName": None, "sum": None, "min": None, "max": None}
    assert partial_from_row(heartbeat).aggregate is None
    with pytest.raises(ValueError, match="non-finite"):
        partial_from_row({**row, "sum": float("inf")})
