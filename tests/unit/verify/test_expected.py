from __future__ import annotations

import hashlib
import json

from sparkwire.verify import expected_results, parse_event


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
