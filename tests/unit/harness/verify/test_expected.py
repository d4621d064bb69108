from __future__ import annotations

import hashlib
import json

import pytest

from sparkwire_harness.verify import AmbiguousLateness, expected_outcome, expected_results, parse_event, parse_heartbeat


def event(ts: int, metric: str, value: float, event_id: str) -> str:
    return json.dumps({"timestamp": ts, "metricName": metric, "value": value, "sourceId": "s",
                       "eventId": event_id})


def test_windows_are_aligned_deduplicated_and_closed_by_the_watermark() -> None:
    raw = [
        event(1_000, "cpu", 1.0, "a"),
        event(1_999, "cpu", 3.0, "b"),
        event(1_999, "cpu", 3.0, "b"),  # duplicate: counted once
        "garbage",
        event(2_500, "cpu", 10.0, "c"),
        event(4_600, "mem", 7.0, "d"),  # watermark = 4600 - 500 = 4100
    ]
    results = expected_results(raw, window_ms=1_000, delay_ms=500)

    by_window = {(r.metric, r.window_start): r for r in results.values()}
    assert set(by_window) == {("cpu", 1_000), ("cpu", 2_000)}  # window [4000, 5000) is still open
    first = by_window[("cpu", 1_000)]
    assert (first.count, first.total, first.minimum, first.maximum, first.average) == (2, 4.0, 1.0, 3.0, 2.0)
    assert first.processing_id == hashlib.sha1(b"2000-cpu").hexdigest()


def test_a_window_ending_exactly_at_the_watermark_is_closed() -> None:
    raw = [event(100, "cpu", 1.0, "a"), event(1_500, "cpu", 1.0, "b")]
    results = expected_results(raw, window_ms=1_000, delay_ms=500)
    assert [r.window_end for r in results.values()] == [1_000]


def test_what_counts_as_an_event() -> None:
    assert parse_event(event(1, "cpu", 2, "x")) is not None  # integer values are numbers
    assert parse_event('{"timestamp": 1.5, "metricName": "cpu", "value": 1, "sourceId": "s", "eventId": "e"}') is None
    assert parse_event('{"timestamp": true, "metricName": "cpu", "value": 1, "sourceId": "s", "eventId": "e"}') is None
    assert parse_event('{"timestamp": 1, "metricName": "cpu", "value": false, "sourceId": "s", "eventId": "e"}') is None


def test_heartbeats_move_the_watermark_and_count_in_no_window() -> None:
    raw = [event(100, "cpu", 1.0, "a"), json.dumps({"type": "heartbeat", "timestamp": 1_600})]
    results = expected_results(raw, window_ms=1_000, delay_ms=500)
    assert [(r.metric, r.count) for r in results.values()] == [("cpu", 1)]
    assert parse_heartbeat(raw[1]) == 1_600 and parse_event(raw[1]) is None
    assert parse_heartbeat(json.dumps({"type": "heartbeat", "timestamp": -1})) is None
    # a heartbeat is not an event, even with every event field
    assert parse_event(json.dumps({**json.loads(event(1, "cpu", 1.0, "x")), "type": "heartbeat"})) is None


def test_events_far_behind_the_newest_are_late_and_dropped() -> None:
    raw = [event(t, "cpu", 1.0, f"e{t}") for t in range(0, 20_001, 1_000)]
    raw.insert(15, event(3_500, "cpu", 100.0, "late"))  # after t=14000: 10.5 s behind
    outcome = expected_outcome(raw, window_ms=1_000, delay_ms=500, late_margin_ms=5_000)
    assert outcome.late_events == ["late"]
    assert all(r.maximum == 1.0 for r in outcome.results.values())


@pytest.mark.parametrize(("timestamp", "where"), [(10_000, 15), (500, 3)])
def test_lateness_the_oracle_cannot_decide_is_refused(timestamp: int, where: int) -> None:
    """Behind by more than the delay but not by delay + margin, or before margin of event time has passed:
    Spark may keep it or drop it depending on its batches."""
    raw = [event(t, "cpu", 1.0, f"e{t}") for t in range(0, 20_001, 1_000)]
    raw.insert(where, event(timestamp, "cpu", 1.0, "unclear"))
    with pytest.raises(AmbiguousLateness):
        expected_outcome(raw, window_ms=1_000, delay_ms=500, late_margin_ms=5_000)


def test_without_a_margin_no_event_may_be_late() -> None:
    raw = [event(0, "cpu", 1.0, "a"), event(2_000, "cpu", 1.0, "b"), event(1_000, "cpu", 1.0, "c")]
    with pytest.raises(AmbiguousLateness):
        expected_results(raw, window_ms=1_000, delay_ms=500)
    assert len(expected_results(raw[:2], window_ms=1_000, delay_ms=500)) == 1


def test_a_partition_produced_far_behind_another_costs_nothing() -> None:
    """Issue 38: partition 1's events arrive 20 s of event time after partition 0's; each partition is in
    order, so none is late and every window is complete."""
    ahead = [(0, event(t, "cpu", 1.0, f"a{t}")) for t in range(0, 25_000, 100)]
    behind = [(1, event(t, "cpu", 2.0, f"b{t}")) for t in range(0, 25_000, 100)]
    outcome = expected_outcome(ahead + behind, window_ms=1_000, delay_ms=1_500)
    assert outcome.late_events == []
    by_end = {r.window_end: r for r in outcome.results.values()}
    assert sorted(by_end) == list(range(1_000, 23_001, 1_000))  # up to the slowest's 24,900 - 1,500
    assert all(r.count == 20 and r.total == 30.0 for r in by_end.values())
    # The same records as one partition: partition 1's are behind by far more than the delay.
    with pytest.raises(AmbiguousLateness):
        expected_outcome([raw for _, raw in ahead + behind], window_ms=1_000, delay_ms=1_500)


def test_late_means_behind_every_partition_and_the_slowest_partition_bounds_the_windows() -> None:
    raw = [(p, event(t, "cpu", 1.0, f"{p}-{t}")) for t in range(0, 20_001, 1_000) for p in (0, 1)]
    raw.append((1, event(3_500, "cpu", 100.0, "late")))  # both partitions at 20 s: its window closed
    outcome = expected_outcome(raw, window_ms=1_000, delay_ms=500, late_margin_ms=5_000)
    assert outcome.late_events == ["late"]
    # a heartbeat on partition 0 alone moves no window: partition 1 still holds them
    beat = [(0, json.dumps({"type": "heartbeat", "timestamp": 30_000}))]
    assert expected_results(raw[:-1] + beat, 1_000, 500) == expected_results(raw[:-1], 1_000, 500)
    # behind its own partition by more than the delay but not behind the slowest one: undecidable
    lagging = [(0, event(t, "cpu", 1.0, f"a{t}")) for t in range(0, 20_001, 1_000)]
    lagging += [(1, event(t, "cpu", 1.0, f"b{t}")) for t in (0, 5_000, 4_000)]
    with pytest.raises(AmbiguousLateness):
        expected_outcome(lagging, window_ms=1_000, delay_ms=500, late_margin_ms=5_000)
