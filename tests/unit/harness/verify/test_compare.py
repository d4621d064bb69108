from __future__ import annotations

import json

from sparkwire.replaylog import Entry
from sparkwire_harness.verify import WindowResult, check_seqs, compare


def result(end: int, metric: str = "cpu") -> WindowResult:
    return WindowResult(metric, end - 1000, end, 2, 4.0, 1.0, 3.0)


def entry(seq: int, r: WindowResult, **override: object) -> Entry:
    data = {"metricName": r.metric, "windowStart": r.window_start, "windowEnd": r.window_end,
            "count": r.count, "sum": r.total, "min": r.minimum, "max": r.maximum, "avg": r.average}
    data.update(override)
    return Entry(seq, r.processing_id, r.metric, json.dumps(data), 0, 0)


def test_exactly_the_expected_results_in_gap_free_order_pass() -> None:
    expected = {r.processing_id: r for r in (result(1000), result(2000))}
    report = compare(expected, [entry(1, result(1000)), entry(2, result(2000))])
    assert report.ok, report.summary()


def test_every_kind_of_problem_is_reported() -> None:
    expected = {r.processing_id: r for r in (result(1000), result(2000), result(3000))}
    entries = [entry(1, result(1000)), entry(3, result(1000)), entry(4, result(2000), avg=2.5),
               entry(5, result(9000))]
    report = compare(expected, entries)
    assert report.duplicated == [result(1000).processing_id]
    assert report.missing == [result(3000).processing_id]
    assert report.unexpected == [result(9000).processing_id]
    assert len(report.value_mismatches) == 1 and "avg" in report.value_mismatches[0]
    assert report.seq_problems and not report.ok


def test_seq_checks_find_holes_and_repeats() -> None:
    assert check_seqs([1, 2, 3]) == []
    assert check_seqs([1, 3]) and check_seqs([1, 1, 2]) and check_seqs([5, 6], first=5) == []
