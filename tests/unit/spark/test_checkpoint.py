"""A batch Spark planned on a stale Kafka leader's offsets (below the batch before it) and never ran is
removed from the offsets log before the query starts, so it is planned again instead of failing forever.

The files are written as Spark 4 writes them (``checkpoint.py``'s docstring); the chaos run that found it
left ``offsets/275`` with partition 0 at 25540 after batch 274 had ended at 25995."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sparkwire.spark.rebuild.checkpoint import drop_unrunnable_batch, regressed_partitions, replan_unrunnable_batch

HEADER = json.dumps({"batchWatermarkMs": 0, "batchTimestampMs": 0, "conf": {}})


def offsets_line(**partitions: int) -> str:
    return json.dumps({"metrics-raw": {key.removeprefix("p"): value for key, value in partitions.items()}})


def write_batch(root: Path, batch: int, *sources: str, committed: bool) -> None:
    (root / "offsets").mkdir(parents=True, exist_ok=True)
    (root / "commits").mkdir(parents=True, exist_ok=True)
    (root / "offsets" / str(batch)).write_text("\n".join(["v1", HEADER, *sources]))
    if committed:
        (root / "commits" / str(batch)).write_text('v1\n{"nextBatchWatermarkMs":0}')


def test_a_partition_whose_end_went_back_is_named_with_both_offsets() -> None:
    assert regressed_partitions([offsets_line(p0=25995, p1=26481)], [offsets_line(p0=25540, p1=26653)]) == [
        "metrics-raw-0 25995→25540"
    ]


def test_equal_or_later_ends_new_partitions_and_other_sources_are_not_regressions() -> None:
    assert regressed_partitions([offsets_line(p0=10, p1=20)], [offsets_line(p0=10, p1=21, p2=0)]) == []
    # A source that is not Kafka (a rate source's line is a number) is ignored, not misread.
    assert regressed_partitions(["7", offsets_line(p0=10)], ["3", offsets_line(p0=10)]) == []


def test_the_uncommitted_regressed_batch_is_removed_and_the_committed_ones_stay(tmp_path: Path) -> None:
    write_batch(tmp_path, 273, offsets_line(p0=25540, p1=26420), committed=True)
    write_batch(tmp_path, 274, offsets_line(p0=25995, p1=26481), committed=True)
    write_batch(tmp_path, 275, offsets_line(p0=25540, p1=26653), committed=False)
    (tmp_path / "offsets" / ".275.crc").write_bytes(b"crc")

    assert drop_unrunnable_batch(tmp_path) == (275, ["metrics-raw-0 25995→25540"])
    assert sorted(p.name for p in (tmp_path / "offsets").iterdir()) == ["273", "274"]
    assert drop_unrunnable_batch(tmp_path) is None  # nothing more to drop


@pytest.mark.parametrize("committed", [True, False])
def test_a_batch_that_ran_or_that_moved_forward_is_never_touched(tmp_path: Path, committed: bool) -> None:
    write_batch(tmp_path, 1, offsets_line(p0=100), committed=True)
    # committed: Spark ran it (whatever its offsets say, its output exists); else: a normal batch in flight
    write_batch(tmp_path, 2, offsets_line(p0=90 if committed else 120), committed=committed)

    assert drop_unrunnable_batch(tmp_path) is None
    assert (tmp_path / "offsets" / "2").exists()


def test_a_new_checkpoint_or_one_elsewhere_is_left_alone(tmp_path: Path) -> None:
    assert drop_unrunnable_batch(tmp_path / "not-yet") is None
    assert drop_unrunnable_batch("s3a://bucket/checkpoint") is None
    write_batch(tmp_path, 0, offsets_line(p0=5), committed=False)
    assert drop_unrunnable_batch(f"file://{tmp_path}") is None


def test_the_replan_is_logged_with_the_query_and_the_partitions(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    write_batch(tmp_path, 4, offsets_line(p0=50), committed=True)
    write_batch(tmp_path, 5, offsets_line(p0=40), committed=False)

    with caplog.at_level("WARNING", logger="sparkwire.spark.rebuild.checkpoint"):
        replan_unrunnable_batch(f"file://{tmp_path}", "aggregate")

    (record,) = caplog.records
    assert "batch 5" in record.getMessage() and "metrics-raw-0 50→40" in record.getMessage()
    assert record.fields == {"event": "batch_replanned", "query": "aggregate", "batch": 5,  # type: ignore[attr-defined]
                             "partitions": ["metrics-raw-0 50→40"]}
    assert not (tmp_path / "offsets" / "5").exists()
