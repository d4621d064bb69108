from __future__ import annotations

import json
from pathlib import Path

from sparkwire_harness.verify import expected_results, oracle_input, read_produced


def event(ts: int, event_id: str) -> str:
    return json.dumps({"timestamp": ts, "metricName": "cpu", "value": 1.0, "sourceId": "s", "eventId": event_id})


def line(index: int, value: str, partition: int | None, kind: str = "event") -> str:
    document: dict[str, object] = {"index": index, "kind": kind, "value": value}
    if partition is not None:
        document["partition"] = partition
    return json.dumps(document)


def test_lines_come_back_in_produced_order_with_their_partitions(tmp_path: Path) -> None:
    beat = json.dumps({"type": "heartbeat", "timestamp": 9})
    # Acknowledged out of produced order across partitions; a heartbeat's copies share one index.
    (tmp_path / "events.jsonl").write_text("\n".join([
        line(1, event(2, "b"), 1), line(2, beat, 1, "heartbeat"), line(0, event(1, "a"), 0),
        line(2, beat, 0, "heartbeat"),
    ]) + "\n")  # fmt: skip
    produced = read_produced(tmp_path / "events.jsonl")
    assert [(r.kind, r.partition) for r in produced] == [("event", 0), ("event", 1), ("heartbeat", 1),
                                                         ("heartbeat", 0)]
    assert oracle_input(produced)[:2] == [(0, event(1, "a")), (1, event(2, "b"))]


def test_parts_follow_one_another_and_a_line_without_a_partition_is_its_value(tmp_path: Path) -> None:
    (tmp_path / "a.jsonl").write_text(line(0, event(1, "a"), None) + "\n")
    (tmp_path / "b.jsonl").write_text(line(0, event(2, "b"), 3) + "\n")
    assert oracle_input(read_produced([tmp_path / "a.jsonl", tmp_path / "b.jsonl"])) == [event(1, "a"),
                                                                                         (3, event(2, "b"))]


def test_the_last_window_waits_for_the_slowest_partition(tmp_path: Path) -> None:
    """What `make demo` showed: two partitions, no heartbeats, partition 0's last event past the last
    window's end + delay and partition 1's not. The job keeps that window open (partition 1 may still hold
    events of it); read as one partition the records close it, and the oracle expected a window the job
    rightly never emitted."""
    records = [line(0, event(1_000, "a"), 0), line(1, event(1_400, "b"), 1), line(2, event(3_600, "c"), 0),
               line(3, event(3_200, "d"), 1)]
    (tmp_path / "events.jsonl").write_text("\n".join(records) + "\n")
    produced = read_produced(tmp_path / "events.jsonl")
    per_partition = expected_results(oracle_input(produced), window_ms=2_000, delay_ms=1_500)
    as_one = expected_results([r.value for r in produced], window_ms=2_000, delay_ms=1_500)
    assert [r.window_end for r in as_one.values()] == [2_000]  # 3,600 - 1,500 >= 2,000
    assert per_partition == {}  # partition 1 at 3,200: 1,700 < 2,000
