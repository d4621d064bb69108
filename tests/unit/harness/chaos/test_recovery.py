"""Recovery time: from a fault's end until every client holds the first result committed after it."""

from __future__ import annotations

import math

from sparkwire_harness.chaos.recovery import Recovery, Sample, own_fault_windows, percentile, recovery, summarize


def test_recovered_when_the_slowest_client_holds_the_first_commit_after_the_fault() -> None:
    samples = [Sample(0, 10, 10), Sample(1, 10, 10), Sample(2, 10, 8), Sample(3, 12, 9), Sample(4, 14, 11),
               Sample(5, 15, 12), Sample(6, 16, 16)]
    # ended at 1.5: head then 10; first commit after it is seq 12 (t=3); the slowest reaches 12 at t=5
    assert recovery(samples, 1.5).seconds == 3.5


def test_a_pipeline_that_commits_nothing_more_never_recovers() -> None:
    samples = [Sample(0, 10, 10), Sample(1, 10, 10), Sample(2, 10, 10)]
    assert recovery(samples, 0.5).seconds is None


def test_samples_while_redis_is_down_do_not_count_as_the_head() -> None:
    samples = [Sample(0, -1, 5), Sample(1, 5, 5), Sample(2, 6, 5), Sample(3, 6, 6)]
    assert recovery(samples, 0).seconds == 3


def test_the_clients_that_held_the_first_commit_last_are_named() -> None:
    def sample(t: float, head: int, seqs: dict[str, int]) -> Sample:
        return Sample(t, head, min(seqs.values()), seqs)

    samples = [sample(0, 10, {"a": 10, "b": 10, "c": 10}), sample(1, 12, {"a": 12, "b": 11, "c": 10}),
               sample(2, 12, {"a": 12, "b": 12, "c": 11}), sample(3, 13, {"a": 13, "b": 12, "c": 12})]
    # the first commit after 0 is seq 12; "c" is the one still below it in the sample before t=3
    assert recovery(samples, 0) == Recovery(3, ("c",), every_client=3)
    # never: whoever was below the target at the end
    assert recovery(samples[:3], 0) == Recovery(None, ("c",))


def _sample(t: float, head: int, seqs: dict[str, int]) -> Sample:
    return Sample(t, head, min(seqs.values()), seqs)


def test_a_client_under_a_fault_of_its_own_is_left_out_and_the_time_counting_it_is_kept() -> None:
    samples = [_sample(0, 10, {"a": 10, "b": 10}), _sample(1, 12, {"a": 10, "b": 10}),
               _sample(2, 12, {"a": 12, "b": 10}), _sample(3, 12, {"a": 12, "b": 10}),
               _sample(9, 14, {"a": 14, "b": 14})]
    # "b"'s own link was blackholed from 2.5 to 8: left out from then on (so the fault's time is the next
    # sample's), kept in every client's time
    assert recovery(samples, 0, {"b": [(2.5, 8.0)]}) == Recovery(3, (), every_client=9, excused=("b",))
    # without its own fault, "b" holds the recovery up to 9 s
    assert recovery(samples, 0, {"b": []}) == Recovery(9, ("b",), every_client=9)


def test_an_own_fault_that_healed_before_the_wait_began_excuses_nobody() -> None:
    samples = [_sample(0, 10, {"a": 10, "b": 10}), _sample(1, 12, {"a": 12, "b": 10}),
               _sample(5, 12, {"a": 12, "b": 12})]
    assert recovery(samples, 0, {"b": [(-10.0, -0.5)]}) == Recovery(5, ("b",), every_client=5)


def test_a_client_that_held_the_commit_before_its_own_fault_is_not_excused() -> None:
    samples = [_sample(0, 10, {"a": 10, "b": 10}), _sample(1, 12, {"a": 10, "b": 12}),
               _sample(2, 12, {"a": 10, "b": 12}), _sample(4, 12, {"a": 12, "b": 12})]
    assert recovery(samples, 0, {"b": [(1.5, 3.0)]}) == Recovery(4, ("a",), every_client=4)


def test_own_fault_windows_map_each_client_to_the_faults_on_its_path() -> None:
    paths = {"clients-0:1": {"edge-0"}, "clients-slow:7": {"edge-1", "slow-clients"}}
    faults = [("edge-1", 5.0, 9.0), ("slow-clients", 20.0, 35.0), ("gw0", 3.0, 3.0), ("edge-0", 40.0, 41.0)]
    assert own_fault_windows(paths, faults) == {"clients-0:1": [(40.0, 41.0)],
                                                 "clients-slow:7": [(5.0, 9.0), (20.0, 35.0)]}


def test_percentiles_are_nearest_rank_and_the_summary_says_what_did_not_recover() -> None:
    assert percentile([5.0, 1.0, 3.0], 0.5) == 3.0
    assert percentile([1.0, 2.0, 30.0], 0.99) == 30.0
    assert math.isnan(percentile([], 0.5))
    lines = summarize({"driver": [4.0, 8.0, None], "kafka": [None]})
    assert "p50    4.0s" in lines[0] and "p99    8.0s" in lines[0] and "(1 not recovered in the run)" in lines[0]
    assert "none measured" in lines[1]
