"""The open windows after each batch as files in the checkpoint: written atomically, read for the next
batch, refused when they do not belong to the query or the job's window."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sparkwire.aggregator.window_state import WindowStateFiles, WindowStateMissing
from sparkwire.aggregator.windows import Aggregate, OpenWindows, Partial

QUERY = "6a1e0b1c-query"


def state_after(latest: int) -> OpenWindows:
    state = OpenWindows(10_000, 5_000)
    state.advance([Partial(20_000, "cpu", latest, Aggregate(1, 2.0, 2.0, 2.0))])
    return state


def test_batch_zero_starts_empty_and_each_batch_reads_the_one_before(tmp_path: Path) -> None:
    files = WindowStateFiles(tmp_path, 10_000, 5_000)
    assert files.load_before(0, QUERY) == OpenWindows(10_000, 5_000)
    files.save(0, QUERY, state_after(12_000))
    files.save(1, QUERY, state_after(13_000))
    assert files.load_before(1, QUERY) == state_after(12_000)
    assert files.load_before(2, QUERY) == state_after(13_000)
    assert files.closed_upto() == {0: 7_000, 1: 8_000}
    assert not list(files.directory.glob("*.tmp"))


def test_a_missing_file_after_batch_zero_is_an_error_that_says_what_to_do(tmp_path: Path) -> None:
    with pytest.raises(WindowStateMissing, match="new checkpoint directory"):
        WindowStateFiles(tmp_path, 10_000, 5_000).load_before(3, QUERY)


def test_another_querys_state_or_another_window_is_refused(tmp_path: Path) -> None:
    WindowStateFiles(tmp_path, 10_000, 5_000).save(0, QUERY, state_after(12_000))
    with pytest.raises(WindowStateMissing, match="belongs to query"):
        WindowStateFiles(tmp_path, 10_000, 5_000).load_before(1, "another")
    with pytest.raises(WindowStateMissing, match="new checkpoint directory"):
        WindowStateFiles(tmp_path, 60_000, 5_000).load_before(1, QUERY)


def test_only_the_last_files_are_kept(tmp_path: Path) -> None:
    files = WindowStateFiles(tmp_path, 10_000, 5_000, keep=3)
    for batch_id in range(6):
        files.save(batch_id, QUERY, state_after(12_000 + batch_id))
    assert sorted(files.closed_upto()) == [3, 4, 5]


def test_a_file_from_before_per_partition_progress_still_loads(tmp_path: Path) -> None:
    files = WindowStateFiles(tmp_path, 10_000, 5_000)
    files.directory.mkdir(parents=True)
    old_format = {"queryId": QUERY, "batchId": 4, "windowMs": 10_000, "delayMs": 5_000, "closedUpto": 7_000,
                  "open": [[20_000, "cpu", 1, 2.0, 2.0, 2.0]]}
    (files.directory / "4.json").write_text(json.dumps(old_format))
    state = files.load_before(5, QUERY)
    assert (state.closed_upto, state.partitions, list(state.open)) == (7_000, {}, [(20_000, "cpu")])
    assert files.recorded_wall_ms(4, QUERY) is None and files.closed_upto() == {4: 7_000}


def test_the_wall_clock_time_a_batch_was_decided_at_is_kept_for_a_re_run(tmp_path: Path) -> None:
    files = WindowStateFiles(tmp_path, 10_000, 5_000)
    files.save(0, QUERY, state_after(12_000), wall_ms=1_700_000_000_123)
    assert files.recorded_wall_ms(0, QUERY) == 1_700_000_000_123
    assert files.recorded_wall_ms(0, "another") is None and files.recorded_wall_ms(1, QUERY) is None
