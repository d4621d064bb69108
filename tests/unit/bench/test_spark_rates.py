"""bench/_spark_rates.py: the aggregator's progress log read back, a rate judged sustained or not, and the
spans of one rendered result."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "bench"))

from _spark_rates import Batch, Rendered, RunSpec, aggregate_batches, highest_sustained, judge, per_window


def progress(name: str, batch: int, rows: int, duration: int) -> str:
    return json.dumps({"ts": 1.0, "level": "info", "msg": "query progress", "event": "query_progress",
                       "name": name, "batchId": batch, "rowsIn": rows, "durationMs": duration})


def test_only_the_aggregate_querys_progress_lines_are_batches() -> None:
    lines = [progress("sparkwire-aggregate", 0, 0, 900), "not json", '{"event": "query_progress"',
             progress("sparkwire-deadletter", 0, 1000, 300), progress("sparkwire-aggregate", 1, 1000, 700),
             json.dumps({"msg": "query started", "event": "query_started"})]
    assert aggregate_batches(lines) == [Batch(0, 0, 900), Batch(1, 1000, 700)]


def batches(*durations: int, rows: int = 1000) -> list[Batch]:
    return [Batch(i, rows, d) for i, d in enumerate(durations)]


def test_a_rate_is_sustained_when_full_batches_end_within_the_trigger() -> None:
    ok = judge(1000, [Batch(0, 0, 5000), *batches(3000, 900, 800, 950, 990)], trigger_ms=1000, warmup=1)
    assert [b.duration_ms for b in ok.measured] == [900, 800, 950, 990] and ok.full and ok.sustained
    assert ok.capacity == 1000 * 4000 / (900 + 800 + 950 + 990)


def test_slow_batches_a_short_quota_or_nothing_measured_are_not_sustained() -> None:
    assert not judge(1000, batches(100, 1100, 1100, 900), 1000, warmup=1).sustained  # p95 over the trigger
    assert not judge(1000, batches(100, *[900] * 30, 1300), 1000, warmup=1).sustained  # slowest past 1.25x
    short = judge(1000, [*batches(100, 500), Batch(9, 400, 200)], 1000, warmup=1)
    assert not short.full and not short.sustained  # the backlog ran out: the input set the pace
    assert not judge(1000, batches(100), 1000, warmup=1).sustained


def test_the_highest_sustained_rate_wins() -> None:
    fast, slow = batches(100, 500, 500), batches(100, 1500, 1500)
    verdicts = [judge(1000, fast, 1000, 1), judge(2000, [Batch(i, 2000, d) for i, d in enumerate([100, 600])], 1000, 1),
                judge(3000, slow, 1000, 1)]
    best = highest_sustained(verdicts)
    assert best is not None and best.rate == 2000
    assert highest_sustained([verdicts[2]]) is None


def test_a_rendered_result_splits_into_close_to_commit_and_commit_to_render() -> None:
    result = Rendered(window_end_ms=10_000, commit_ms=16_500, received_ms=16_520)
    assert (result.close_to_commit_ms, result.commit_to_render_ms, result.close_to_render_ms) == (6_500, 20, 6_520)


def test_a_run_spec_reads_rate_trigger_and_shuffle_partitions() -> None:
    assert RunSpec.parse("50000@5000/4") == RunSpec(50_000, 5_000, 4)
    assert RunSpec.parse(" 20000@1000") == RunSpec(20_000, 1_000, 2)
    assert RunSpec.parse("20000@3000").per_batch == 60_000
    single = RunSpec.parse("100000@5000/2/single")
    assert single == RunSpec(100_000, 5_000, 2, dead_letters=False) and "no dead-letter query" in single.label
    tiered = RunSpec.parse("100000@10000/2/single/tiered")
    assert tiered == RunSpec(100_000, 10_000, 2, dead_letters=False, tiered=True)
    assert tiered.label.endswith("no dead-letter query, full tiered JIT")
    assert tiered.options[-1] == "--driver-java-options=" and "--driver-java-options=" not in single.options
    for bad in ("0@1000", "1000@0", "1000@1000/0", "x@1", "1000@1000/2/double", "1000@1000/2/tiered/tiered"):
        with pytest.raises(ValueError):
            RunSpec.parse(bad)


def test_a_batch_within_one_percent_of_its_quota_counts_as_full() -> None:
    assert judge(1000, [Batch(0, 995, 500), Batch(1, 1003, 500)], 1000, warmup=0).full
    assert not judge(1000, [Batch(0, 985, 500)], 1000, warmup=0).full


def test_a_batch_carries_sparks_phases_and_the_sinks_collect_and_commit() -> None:
    sink = json.dumps({"event": "sink_commit", "batchId": 4, "collectMs": 700.5, "commitMs": 900.5})
    line = json.dumps({"event": "query_progress", "name": "sparkwire-aggregate", "batchId": 4, "rowsIn": 10,
                       "durationMs": 1000, "phasesMs": {"addBatch": 950, "walCommit": 20}})
    (batch,) = aggregate_batches([sink, line])
    assert batch.phase_ms("addBatch") == 950 and batch.phase_ms("queryPlanning") == 0
    assert (batch.phase_ms("collect"), batch.phase_ms("redis")) == (700.5, 200.0)
    assert judge(10_000, [batch], 1000, warmup=0).phase_ms("walCommit") == 20


def test_per_window_takes_each_windows_slowest_result_and_skips_results_without_a_window() -> None:
    rendered = [Rendered(20_000, 26_400, 26_402), Rendered(10_000, 17_700, 17_743), Rendered(10_000, 17_700, 17_752),
                Rendered(0, 5_000, 5_001)]
    assert per_window(rendered) == [(10_000, 7_752), (20_000, 6_402)]
