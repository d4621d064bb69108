"""The checkpoint's offsets log read as Spark 4.0 writes it (files copied from a real run's checkpoint),
and the plan of what a rebuild can recompute exactly."""

from __future__ import annotations

import json
import random
from collections import Counter
from pathlib import Path

import pytest

from sparkwire.aggregator.windows import Aggregate, OpenWindows, Partial
from sparkwire.spark.rebuild.checkpoint import BatchInput, CheckpointError, QueryHistory, read_history
from sparkwire.spark.rebuild.plan import closed_late_bound, plan_rebuild

TOPIC = "t611008a783-raw"
CONF = {"spark.sql.shuffle.partitions": "2", "spark.sql.streaming.multipleWatermarkPolicy": "min"}
# (watermark, end offsets of partitions 0 and 1) of batches 0..4, as a real run wrote them
BATCHES = [(0, 144, 155), (1_700_000_000_978, 288, 310), (1_700_000_002_450, 433, 464),
           (1_700_000_003_952, 577, 619), (1_700_000_005_368, 722, 773)]
DELAY = 500
WINDOW = 1_000


def write_checkpoint(root: Path, batches: list[tuple[int, int, int]], first: int = 0) -> Path:
    query = root / "aggregate"
    (query / "offsets").mkdir(parents=True)
    (query / "commits").mkdir()
    (query / "sources" / "0").mkdir(parents=True)
    (query / "metadata").write_text('{"id":"acbbe343-fc34-4e6d-953c-829bd0e16765"}')
    (query / "sources" / "0" / "0").write_bytes(b'\x00v1\n{"' + TOPIC.encode() + b'":{"0":0,"1":0}}')
    for batch_id, (watermark, end0, end1) in enumerate(batches):
        if batch_id < first:
            continue
        header = json.dumps({"batchWatermarkMs": watermark, "batchTimestampMs": 1795466437839, "conf": CONF})
        source = json.dumps({TOPIC: {"0": end0, "1": end1}})
        (query / "offsets" / str(batch_id)).write_text(f"v1\n{header}\n{source}")
        (query / "commits" / str(batch_id)).write_text('v1\n{"nextBatchWatermarkMs":0}')
    return query


def test_the_offsets_log_gives_each_batch_its_range_and_both_watermarks(tmp_path: Path) -> None:
    history = read_history(write_checkpoint(tmp_path, BATCHES), TOPIC)
    assert history.query_id == "acbbe343-fc34-4e6d-953c-829bd0e16765"
    assert history.committed == 4
    third = history.batches[2]
    assert (third.start, third.end) == ({0: 288, 1: 310}, {0: 433, 1: 464})
    assert (third.watermark_ms, third.late_watermark_ms) == (1_700_000_002_450, 1_700_000_000_978)
    assert history.batches[0].start == {0: 0, 1: 0} and history.batches[0].late_watermark_ms == 0
    assert [b.batch_id for b in history.upto(3)] == [0, 1, 2]
    with pytest.raises(CheckpointError):
        history.upto(6)


def test_purged_offsets_files_start_the_known_history_a_batch_later(tmp_path: Path) -> None:
    history = read_history(write_checkpoint(tmp_path, BATCHES, first=2), TOPIC)
    assert [b.batch_id for b in history.batches] == [3, 4]
    assert history.batches[0].start == {0: 433, 1: 464}
    plan = plan_rebuild(history, 5, {0: 0, 1: 0}, DELAY)
    assert plan.purged_before == 3 and [b.batch_id for b in plan.batches] == [3, 4]
    assert plan.lost_before_ms == 1_700_000_003_952 + DELAY


def test_everything_in_kafka_is_a_complete_rebuild_emitting_up_to_the_last_watermark(tmp_path: Path) -> None:
    history = read_history(write_checkpoint(tmp_path, BATCHES), TOPIC)
    plan = plan_rebuild(history, 4, {0: 0, 1: 0}, DELAY)
    assert plan.complete and plan.lost_records == 0 and plan.purged_before is None
    assert [b.batch_id for b in plan.batches] == [0, 1, 2, 3]
    assert plan.emit_watermark_ms == 1_700_000_003_952
    assert plan.keeps(1_700_000_002_000, 1_700_000_003_000)
    assert not plan.keeps(1_700_000_003_000, 1_700_000_004_000)  # still open in Spark's state at batch 3
    assert plan.emitting_batch(1_700_000_001_000) == 2
    assert plan.emitting_batch(1_700_000_000_978) == 1


def test_input_past_retention_keeps_only_windows_no_lost_batch_fed(tmp_path: Path) -> None:
    history = read_history(write_checkpoint(tmp_path, BATCHES), TOPIC)
    # Partition 1 lost its first 320 records: batches 0-2 read some of them, batch 3 starts at 464.
    plan = plan_rebuild(history, 5, {0: 0, 1: 320}, DELAY)
    assert not plan.complete
    assert [b.batch_id for b in plan.batches] == [3, 4]
    [shortfall] = plan.shortfalls
    assert (shortfall.partition, shortfall.needed, shortfall.earliest, shortfall.records) == (1, 0, 320, 320)
    bound = 1_700_000_003_952 + DELAY  # batches before 3 saw no event time beyond watermark(3) + delay
    assert plan.lost_before_ms == bound
    assert not plan.keeps(bound - 1000, bound)
    assert plan.keeps(bound + 1, bound + 1001) is (bound + 1001 <= plan.emit_watermark_ms)


def test_nothing_left_in_kafka_loses_everything_the_log_held(tmp_path: Path) -> None:
    history = read_history(write_checkpoint(tmp_path, BATCHES), TOPIC)
    plan = plan_rebuild(history, 5, {0: 722, 1: 773}, DELAY)
    assert plan.batches == [] and plan.lost_before_ms == 1_700_000_005_368
    assert plan.lost_records == 722 + 773


def test_a_sink_that_closes_windows_itself_plans_with_its_bounds_and_each_batchs_own_late_filter(
        tmp_path: Path) -> None:
    history = read_history(write_checkpoint(tmp_path, BATCHES), TOPIC)
    # the bound after batch b is the watermark Spark wrote for batch b + 1; the last one is only in the state
    closed = {b: BATCHES[b + 1][0] for b in range(4)} | {4: 1_700_000_006_900}
    plan = plan_rebuild(history, 5, {0: 0, 1: 0}, DELAY, closed, WINDOW)
    assert plan.emit_watermark_ms == 1_700_000_006_900
    assert [(b.watermark_ms, b.late_watermark_ms) for b in plan.batches][2] == (1_700_000_002_450,) * 2
    # the first batch whose bound reached the end: a batch earlier than Spark's append mode would emit it
    assert plan.emitting_batch(1_700_000_002_000) == 1
    assert plan_rebuild(history, 5, {0: 0, 1: 0}, DELAY).emitting_batch(1_700_000_002_000) == 2
    assert plan.emitting_batch(1_700_000_006_900) == 4 and plan.keeps(1_700_000_000_000, 1_700_000_006_900)
    assert not plan.keeps(1_700_000_000_000, 1_700_000_006_901)
    with pytest.raises(CheckpointError, match="no window state for batch 4"):
        plan_rebuild(history, 5, {0: 0, 1: 0}, DELAY, {b: closed[b] for b in range(4)}, WINDOW)


def window_end(event_ms: int) -> int:
    return event_ms - event_ms % WINDOW + WINDOW


def test_the_closed_late_bound_drops_exactly_the_events_of_closed_windows() -> None:
    for closed in (1_700_000_002_000, 1_700_000_002_001, 1_700_000_002_999, 1_700_000_003_000, -1, 0):
        bound = closed_late_bound(closed, WINDOW)
        for event in range(closed - 2_500, closed + 2_500):
            assert (event > bound) is (window_end(event) > closed), (closed, event)


def test_a_closing_sinks_batches_drop_the_events_of_windows_closed_before_them(tmp_path: Path) -> None:
    history = read_history(write_checkpoint(tmp_path, BATCHES), TOPIC)
    # The sink's bounds (never going back) mostly run ahead of Spark's watermark, the dedup's: delay + partition
    # skew behind the newest event time. -(2**63): its bound before any event, nothing closed.
    closed = {0: -(2**63), 1: 1_700_000_003_200, 2: 1_700_000_003_200, 3: 1_700_000_006_100, 4: 1_700_000_009_000}
    plan = plan_rebuild(history, 5, {0: 0, 1: 0}, DELAY, closed, WINDOW)
    late = {b.batch_id: b.late_watermark_ms for b in plan.batches}
    assert late[0] == 0 and late[1] == 1_700_000_000_978  # nothing closed before them: Spark's watermark
    # the window ending at ...003_000 closed before batch 2: its events up to ...002_999 are late
    assert late[2] == 1_700_000_002_999
    assert late[3] == 1_700_000_003_952  # Spark's watermark above what had closed: it decides
    assert late[4] == 1_700_000_005_999  # not ...006_099: the window ending at ...007_000 is still open
    with pytest.raises(ValueError, match="window_ms"):
        plan_rebuild(history, 5, {0: 0, 1: 0}, DELAY, closed)
    # A recomputed batch whose predecessor's bound is unknown cannot be rebuilt exactly; a lost one's is not
    # needed (partition 0 lost its first 300 records: batches 0-2 are not recomputed).
    without_1 = {b: bound for b, bound in closed.items() if b != 1}
    with pytest.raises(CheckpointError, match="no window state for batch 1"):
        plan_rebuild(history, 5, {0: 0, 1: 0}, DELAY, without_1, WINDOW)
    partial = plan_rebuild(history, 5, {0: 300, 1: 0}, DELAY, without_1, WINDOW)
    assert [b.batch_id for b in partial.batches] == [3, 4]


def simulated_run(seed: int, batches: int) -> tuple[QueryHistory, list[list[tuple[int, int]]]]:
    """Two partitions read unevenly (partition 1 lags for a few batches, then catches up) with some events
    seconds late: the checkpoint's history (Spark's watermark 0: it keeps every row, the sink decides) and
    each batch's events as (partition, event time)."""
    rng = random.Random(seed)
    clock = {0: 1_700_000_000_000, 1: 1_700_000_000_000}
    inputs: list[list[tuple[int, int]]] = []
    starts: dict[int, int] = {0: 0, 1: 0}
    history: list[BatchInput] = []
    for batch_id in range(batches):
        events = []
        for partition in (0, 1):
            lagging = partition == 1 and 3 <= batch_id % 10 <= 5
            for _ in range(rng.randint(0, 3) if lagging else rng.randint(10, 40)):
                clock[partition] += rng.randint(0, 60)
                late_by = rng.choice([0] * 8 + [rng.randint(1_000, 6_000)])
                events.append((partition, clock[partition] - rng.randint(0, 200) - late_by))
        ends = {p: starts[p] + sum(1 for q, _ in events if q == p) for p in (0, 1)}
        history.append(BatchInput(batch_id, 0, 0, dict(starts), ends))
        inputs.append(events)
        starts = ends
    return QueryHistory("q", TOPIC, history, batches - 1, dict.fromkeys(range(batches), 0)), inputs


@pytest.mark.parametrize("seed", [1, 2, 3, 61843])
def test_the_rebuilds_late_filter_counts_what_the_live_closing_sink_counted(seed: int) -> None:
    """The sink's own window state (``aggregator.windows``) run batch by batch, against the plan's per-batch
    late bounds applied to the same events and aggregated at once, as the recompute does."""
    history, inputs = simulated_run(seed, 40)
    live = OpenWindows(WINDOW, DELAY)
    closed: dict[int, int] = {}
    emitted: dict[int, tuple[int, int]] = {}  # window end -> (count, the batch that closed it)
    dropped = 0
    for batch_id, events in enumerate(inputs):
        groups: dict[tuple[int, int], list[int]] = {}
        for partition, event in events:
            groups.setdefault((window_end(event), partition), []).append(event)
        partials = [Partial(end, "m", max(times), Aggregate(len(times), 0.0, 0.0, 0.0), partition)
                    for (end, partition), times in groups.items()]
        advanced = live.advance(partials)
        dropped += advanced.late_events
        closed[batch_id] = live.closed_upto
        emitted.update({row["windowEnd"]: (row["count"], batch_id) for row in advanced.closed})
    assert dropped > 20  # the case at hand: events the live sink dropped that Spark's watermark kept

    plan = plan_rebuild(history, len(inputs), {0: 0, 1: 0}, DELAY, closed, WINDOW)
    counts: Counter[int] = Counter()
    for batch in plan.batches:
        counts.update(window_end(event) for _, event in inputs[batch.batch_id] if event > batch.late_watermark_ms)
    rebuilt = {end: (count, plan.emitting_batch(end)) for end, count in counts.items() if plan.keeps(end - WINDOW, end)}
    assert rebuilt == emitted
    # Spark's watermark alone (what the rebuild applied before) counts the dropped events too.
    unfiltered = Counter(window_end(event) for events in inputs for _, event in events)
    assert sum(unfiltered[end] for end in emitted) > sum(count for count, _ in emitted.values())
