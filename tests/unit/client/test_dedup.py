from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sparkwire.client.dedup import ClientDeduper


def test_deduper_remembers_up_to_its_capacity_and_refreshes_repeats() -> None:
    deduper = ClientDeduper(capacity=3)
    assert [deduper.is_duplicate(p) for p in ("a", "b", "c", "a", "d")] == [False, False, False, True, False]
    assert len(deduper) == 3
    assert deduper.is_duplicate("a")  # refreshed by its repeat, so "b" was the one forgotten
    assert not deduper.is_duplicate("b")
    assert deduper.duplicates == 2


def test_deduper_needs_room_for_one() -> None:
    with pytest.raises(ValueError, match="capacity"):
        ClientDeduper(capacity=0)


@given(st.lists(st.sampled_from("abcdefghij"), max_size=200), st.integers(1, 12))
def test_deduper_is_exact_within_its_capacity_and_never_grows_past_it(ids: list[str], capacity: int) -> None:
    deduper = ClientDeduper(capacity)
    for i, pid in enumerate(ids):
        seen_before = pid in ids[:i]
        flagged = deduper.is_duplicate(pid)
        if not seen_before or len(set(ids[:i])) <= capacity:  # nothing forgotten yet: exact answers
            assert flagged == seen_before
        if i > 0 and ids[i - 1] == pid:
            assert flagged
        assert len(deduper) <= capacity
