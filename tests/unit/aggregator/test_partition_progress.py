"""The closing rule: a window closes once every active Kafka partition has passed its end + delay; a lagging
partition holds windows open, a silent one stops holding them after the idle time; late events counted."""

from __future__ import annotations

from sparkwire.aggregator.partition_progress import NO_BOUND, PartitionProgress, closing_bound, track_progress
from sparkwire.aggregator.windows import Aggregate, OpenWindows, Partial

W, DELAY, IDLE = 1_000, 1_500, 60_000


def event(end: int, latest: int, partition: int, metric: str | None = "cpu", count: int = 1) -> Partial:
    return Partial(end, metric, latest, None if metric is None else Aggregate(count, float(count), 1.0, 1.0),
                   partition)


def test_the_bound_follows_the_slowest_active_partition_and_never_goes_back() -> None:
    progress = {0: PartitionProgress(30_000), 1: PartitionProgress(12_000)}
    assert closing_bound(progress, DELAY) == 10_500
    assert closing_bound(progress, DELAY, previous_bound=11_000) == 11_000
    idle_one = {0: PartitionProgress(30_000), 1: PartitionProgress(12_000, 0, idle=True)}
    assert closing_bound(idle_one, DELAY) == 28_500  # the idle partition holds nothing back
    every_one_idle = {p: PartitionProgress(t, 0, idle=True) for p, t in ((0, 30_000), (1, 12_000))}
    assert closing_bound(every_one_idle, DELAY) == 28_500  # nothing sends: the newest holds
    assert closing_bound({}, DELAY) == NO_BOUND


def test_a_partition_is_idle_after_reading_nothing_for_the_idle_time_counted_from_its_first_silent_batch() -> None:
    step = track_progress({}, {0: 5_000, 1: 4_000}, now_ms=0, idle_ms=IDLE)
    assert step.progress == {0: PartitionProgress(5_000), 1: PartitionProgress(4_000)}
    step = track_progress(step.progress, {0: 6_000}, now_ms=500, idle_ms=IDLE)  # 1 silent since 500
    assert step.progress[1] == PartitionProgress(4_000, silent_since_ms=500) and step.went_idle == []
    step = track_progress(step.progress, {0: 7_000}, now_ms=60_499, idle_ms=IDLE)
    assert step.went_idle == [] and not step.progress[1].idle
    step = track_progress(step.progress, {0: 8_000}, now_ms=60_500, idle_ms=IDLE)
    assert step.went_idle == [1] and step.progress[1].idle
    step = track_progress(step.progress, {0: 9_000}, now_ms=70_000, idle_ms=IDLE)
    assert step.went_idle == []  # said once
    step = track_progress(step.progress, {1: 5_000}, now_ms=70_500, idle_ms=IDLE)
    assert step.resumed == [1] and step.progress[1] == PartitionProgress(5_000)
    assert step.progress[0] == PartitionProgress(9_000, silent_since_ms=70_500)


def test_without_an_idle_time_a_silent_partition_holds_windows_for_ever() -> None:
    step = track_progress({0: PartitionProgress(1_000)}, {1: 90_000}, now_ms=10**9, idle_ms=None)
    step = track_progress(step.progress, {1: 95_000}, now_ms=10**12, idle_ms=None)
    assert not step.progress[0].idle and closing_bound(step.progress, DELAY) == -500


def test_a_lagging_partition_holds_its_windows_open_until_it_catches_up_and_nothing_is_late() -> None:
    """Partition 0 is read 20 s ahead (a backlog after a leader failover) while partition 1 gives a few
    records a batch: the windows wait for partition 1, complete."""
    state = OpenWindows(W, DELAY)
    state.advance([event(1_000, 900, 0), event(1_000, 950, 1)], now_ms=0, idle_ms=IDLE)
    ahead = state.advance([event(end, end - 1, 0) for end in range(2_000, 22_001, 1_000)]
                          + [event(2_000, 1_200, 1)], now_ms=300, idle_ms=IDLE)
    assert ahead.closed == [] and state.closed_upto == -300  # 1,200 - 1,500: partition 1 holds them
    caught_up = state.advance([event(end, end - 1, 1) for end in range(2_000, 22_001, 1_000)],
                              now_ms=600, idle_ms=IDLE)
    assert caught_up.late_events == 0 and caught_up.after_close == 0
    assert [(r["windowEnd"], r["count"]) for r in caught_up.closed] == [
        (end, 3 if end == 2_000 else 2) for end in range(1_000, 20_001, 1_000)]  # up to 21,999 - 1,500
    assert state.closed_upto == 20_499


def test_the_old_rule_would_have_closed_them_on_the_batch_read_ahead() -> None:
    """What 9d11b91's sink did, for contrast: one bound from the newest event time of the batch."""
    state = OpenWindows(W, DELAY)
    state.advance([event(1_000, 900, 0), event(1_000, 950, 1)], now_ms=0, idle_ms=IDLE)
    batch = [event(end, end - 1, 0) for end in range(2_000, 22_001, 1_000)]
    newest_of_the_batch = max(p.latest_ms for p in batch) - DELAY
    state.advance(batch, now_ms=300, idle_ms=IDLE)
    assert state.closed_upto < newest_of_the_batch


def test_a_silent_partition_stops_holding_windows_after_the_idle_time_and_its_late_events_are_counted() -> None:
    state = OpenWindows(W, DELAY)
    state.advance([event(1_000, 900, 0), event(1_000, 950, 1)], now_ms=0, idle_ms=IDLE)
    held = state.advance([event(5_000, 4_999, 0)], now_ms=1_000, idle_ms=IDLE)
    assert held.closed == [] and held.went_idle == []
    later = state.advance([event(6_000, 5_999, 0)], now_ms=61_000, idle_ms=IDLE)
    assert later.went_idle == [1]
    assert state.closed_upto == 5_999 - DELAY
    assert [r["windowEnd"] for r in later.closed] == [1_000]  # 5,000 > 4,499: still open
    back = state.advance([event(1_000, 990, 1, count=3), event(5_000, 4_800, 1)], now_ms=62_000, idle_ms=IDLE)
    assert back.resumed == [1]
    assert (back.after_close, back.late_events) == (1, 3)  # window 1,000 was closed: 3 events late
    assert state.closed_upto == 4_499  # it holds again, but the bound does not go back
    assert state.open[(5_000, "cpu")].count == 2


def test_heartbeats_move_a_partitions_progress() -> None:
    state = OpenWindows(W, DELAY)
    state.advance([event(1_000, 900, 0), event(3_000, 2_600, 1, metric=None)], now_ms=0, idle_ms=IDLE)
    assert state.closed_upto == 900 - DELAY
    closed = state.advance([event(4_000, 3_000, 0, metric=None)], now_ms=100, idle_ms=IDLE).closed
    assert state.closed_upto == 1_100 and [r["windowEnd"] for r in closed] == [1_000]


def test_progress_and_idleness_survive_the_document_and_an_old_document_still_loads() -> None:
    state = OpenWindows(W, DELAY)
    state.advance([event(1_000, 900, 0), event(1_000, 950, 1)], now_ms=0, idle_ms=IDLE)
    state.advance([event(5_000, 4_999, 0)], now_ms=61_000, idle_ms=IDLE)
    state.advance([event(6_000, 5_999, 0)], now_ms=122_000, idle_ms=IDLE)
    assert state.partitions[1].idle
    assert OpenWindows.from_document(state.to_document()) == state
    old = {"windowMs": W, "delayMs": DELAY, "closedUpto": 4_499, "open": [[6_000, "cpu", 1, 1.0, 1.0, 1.0]]}
    loaded = OpenWindows.from_document(old)
    assert (loaded.closed_upto, loaded.partitions, list(loaded.open)) == (4_499, {}, [(6_000, "cpu")])
    loaded.advance([event(6_000, 7_000, 0), event(7_000, 6_500, 1)], now_ms=0, idle_ms=IDLE)
    assert loaded.closed_upto == 5_000 and set(loaded.partitions) == {0, 1}
