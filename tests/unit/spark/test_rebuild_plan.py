"""The checkpoint's offsets log read as Spark 4.0 writes it (files copied from a real run's checkpoint),
and the plan of what a rebuild can recompute exactly."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sparkwire.spark.checkpoint import CheckpointError, read_history
from sparkwire.spark.rebuild_plan import plan_rebuild

TOPIC = "t611008a783-raw"
CONF = {"spark.sql.shuffle.partitions": "2", "spark.sql.streaming.multipleWatermarkPolicy": "min"}
# (watermark, end offsets of partitions 0 and 1) of batches 0..4, as a real run wrote them
BATCHES = [(0, 144, 155), (1_700_000_000_978, 288, 310), (1_700_000_002_450, 433, 464),
           (1_700_000_003_952, 577, 619), (1_700_000_005_368, 722, 773)]
DELAY = 500


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
    plan = plan_rebuild(history, 5, {0: 0, 1: 0}, DELAY, closed)
    assert plan.emit_watermark_ms == 1_700_000_006_900
    assert [(b.watermark_ms, b.late_watermark_ms) for b in plan.batches][2] == (1_700_000_002_450,) * 2
    # the first batch whose bound reached the end: a batch earlier than Spark's append mode would emit it
    assert plan.emitting_batch(1_700_000_002_000) == 1
    assert plan_rebuild(history, 5, {0: 0, 1: 0}, DELAY).emitting_batch(1_700_000_002_000) == 2
    assert plan.emitting_batch(1_700_000_006_900) == 4 and plan.keeps(1_700_000_000_000, 1_700_000_006_900)
    assert not plan.keeps(1_700_000_000_000, 1_700_000_006_901)
    with pytest.raises(CheckpointError, match="no window state for batch 4"):
        plan_rebuild(history, 5, {0: 0, 1: 0}, DELAY, {b: closed[b] for b in range(4)})
