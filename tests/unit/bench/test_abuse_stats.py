"""bench/_abuse_stats.py: the abuse benchmark's rows over time, RSS growth after warm-up, the exactly-once
check of an honest client and its tables."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "bench"))

from _abuse_stats import (
    Latency,
    PhaseSummary,
    Sample,
    delivery,
    latency_quantiles,
    outcomes_table,
    rows,
    rows_table,
    rss_growth,
    summary_table,
)


def samples(rss: list[int], *, fds: int = 20, cpu_per_s: float = 0.5, attacks_per_s: int = 10) -> list[Sample]:
    return [Sample(float(t), kib, fds + t, t * cpu_per_s, t * attacks_per_s) for t, kib in enumerate(rss)]


def test_rss_growth_is_the_largest_and_last_sample_after_warm_up_against_the_median_at_its_end() -> None:
    # Warm-up 10 s: the samples at 0..10 s are the reference window, their median 100,000 KiB.
    rss = [50_000] * 2 + [99_000, 101_000] + [100_000] * 7 + [102_000, 104_000, 103_000]
    growth = rss_growth(samples(rss), warmup_s=10)
    assert (growth.reference_kib, growth.max_kib, growth.end_kib) == (100_000, 104_000, 103_000)
    assert growth.max_pct == pytest.approx(4.0)
    assert growth.end_pct == pytest.approx(3.0)
    assert growth.flat


def test_rss_growth_over_five_percent_is_not_flat_and_the_warm_up_itself_does_not_count() -> None:
    rss = [10_000] + [100_000] * 10 + [106_000]
    growth = rss_growth(samples(rss), warmup_s=10)
    assert growth.reference_kib == 100_000
    assert growth.max_pct == pytest.approx(6.0)
    assert not growth.flat


def test_rss_growth_needs_a_sample_after_the_warm_up() -> None:
    with pytest.raises(ValueError, match="too short"):
        rss_growth(samples([100_000] * 5), warmup_s=10)


def test_a_client_that_applied_every_seq_once_in_order_is_exactly_once() -> None:
    assert delivery([1, 2, 3, 4], 4).exactly_once


@pytest.mark.parametrize(("seqs", "field", "count"), [
    ([1, 2, 4], "missing", 1),
    ([1, 2, 2, 3], "repeated", 1),
    ([1, 2, 3, 9], "repeated", 1),  # a seq never committed
    ([1, 3, 2], "out_of_order", 1),
])
def test_a_hole_a_repeat_or_a_disorder_is_not_exactly_once(seqs: list[int], field: str, count: int) -> None:
    result = delivery(seqs, 3)
    assert getattr(result, field) == count
    assert not result.exactly_once


def test_what_the_client_itself_dropped_or_saw_missing_or_a_second_snapshot_is_not_exactly_once() -> None:
    assert not delivery([1, 2], 2, duplicates_dropped=1).exactly_once
    assert not delivery([1, 2], 2, gaps=1).exactly_once
    assert not delivery([1, 2], 2, snapshots=2).exactly_once
    assert delivery([1, 2], 2, snapshots=1).exactly_once


def test_latency_quantiles_are_nearest_rank_and_nan_without_samples() -> None:
    assert latency_quantiles([float(x) for x in range(1, 101)]) == (50.0, 99.0, 100.0)
    assert all(math.isnan(x) for x in latency_quantiles([]))


def test_rows_cut_the_phase_by_time_with_cpu_fds_attacks_and_the_latencies_received_in_each() -> None:
    phase = samples([100_000 + t for t in range(7)])  # 0..6 s
    latencies = [Latency(0.5, 10.0), Latency(2.0, 30.0), Latency(2.5, 20.0), Latency(3.5, 5.0), Latency(6.0, 7.0)]
    first, second = rows(phase, latencies, row_seconds=3)
    assert (first.end, first.rss_kib, first.fds, first.max_fds) == (3.0, 100_003, 23, 23)
    assert first.cpu_pct == pytest.approx(50.0)
    assert (first.attacks, first.entries, first.p50, first.max) == (30, 3, 20.0, 30.0)
    assert (second.end, second.entries, second.p99) == (6.0, 2, 7.0)
    table = rows_table([first, second])
    assert table[0].startswith("| t (s) | RSS (MiB)")
    assert table[2] == "| 3 | 97.7 | 23 / 23 | 50 | 30 | 3 | 20 | 30 | 30 |"


def test_a_partial_last_row_ends_at_the_last_sample() -> None:
    [only, last] = rows(samples([1_000] * 5), [], row_seconds=3)
    assert (only.end, last.end, last.entries) == (3.0, 4.0, 0)
    assert math.isnan(last.p50)
    assert "| - | - | - |" in rows_table([last])[2]


def test_the_summary_puts_the_idle_run_beside_the_churn_run_and_marks_a_client_not_exactly_once() -> None:
    good, bad = delivery([1, 2], 2), delivery([1], 2)
    idle = PhaseSummary("idle", 60, 2, [good, good], [5.0, 6.0, 7.0], 12.5, 80_000, 81_920, 30, 30)
    churn = PhaseSummary("churn", 600, 2, [good, bad], [8.0, 9.0, 50.0], 95.0, 81_920, 83_968, 30, 400, 60_000)
    table = summary_table([idle, churn])
    assert table[2] == "| idle | 60 | 2/2 | 4 | 6 | 7 | 7 | 12 | 78.1 → 80.0 | 30 → 30 | 0 |"
    assert table[3] == "| churn | 600 | 1/2 **NO** | 3 | 9 | 50 | 50 | 95 | 80.0 → 82.0 | 30 → 400 | 60,000 |"


def test_the_outcomes_table_says_how_many_endings_the_docs_do_not_give() -> None:
    table = outcomes_table({"no_hello": {"close 4408": 10}, "bad_token": {"close 4401": 8, "http 503": 2}},
                           {"no_hello": ("close 4408",), "bad_token": ("close 4401",)})
    assert table[2:] == ["| bad_token | 10 | 8 close 4401, 2 http 503 | **2 not** |",
                         "| no_hello | 10 | 10 close 4408 | yes |"]


def test_a_sample_taken_a_little_after_a_row_end_still_closes_that_row() -> None:
    late = [Sample(t + (0.02 if t else 0.0), 1_000, 10, 0.0) for t in range(7)]
    assert [r.end for r in rows(late, [], row_seconds=3)] == [3.02, 6.02]
