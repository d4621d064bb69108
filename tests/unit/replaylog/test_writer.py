from __future__ import annotations

import random

import pytest

from sparkwire.replaylog import Record, plan_chunks


def records(n: int) -> list[Record]:
    return [Record(processing_id=f"pid-{i:04d}", key=f"k{i % 3}", payload="{}") for i in range(n)]


def test_chunks_are_the_same_whatever_the_row_order() -> None:
    batch = records(23)
    shuffled = batch[:]
    random.Random(7).shuffle(shuffled)
    assert plan_chunks(shuffled, 5) == plan_chunks(batch, 5)


def test_chunks_cover_every_record_once_and_respect_the_size() -> None:
    chunks = plan_chunks(records(23), 5)
    assert [len(c) for c in chunks] == [5, 5, 5, 5, 3]
    flat = [r.processing_id for c in chunks for r in c]
    assert flat == sorted(r.processing_id for r in records(23))


def test_empty_batch_is_one_empty_chunk() -> None:
    assert plan_chunks([], 10) == [[]]


def test_chunk_size_must_be_positive() -> None:
    with pytest.raises(ValueError, match="chunk_size"):
        plan_chunks(records(2), 0)
