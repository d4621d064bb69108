"""bench/_update_latency.py: which received revision first showed each order."""

from __future__ import annotations

import sys
from decimal import Decimal
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "bench"))

from _update_latency import Received, drawn_at, first_shown, spans

from sparkwire.examples.orders.expected import Order, iso

WINDOW_MS, SLIDE_MS = 10_000, 5_000


def order(offset: int, order_id: str, region: str, ts_ms: int, partition: int = 0) -> Order:
    return Order(partition, offset, order_id, region, Decimal("1.00"), ts_ms)


def revision(end_ms: int, region: str, orders: int, received_ms: int, seq: int = 0) -> Received:
    return Received(seq, iso(end_ms), region, orders, received_ms - 5, received_ms)


def test_the_kth_order_of_a_result_is_shown_by_its_first_revision_counting_k() -> None:
    # Both orders fall in the windows ending at 10 s and 15 s.
    orders = [order(0, "a", "eu", 6_000), order(1, "b", "eu", 6_500)]
    received = [revision(10_000, "eu", 1, 7_000), revision(15_000, "eu", 1, 7_000),
                revision(10_000, "eu", 2, 8_000), revision(15_000, "eu", 2, 8_000)]
    shown = first_shown(orders, received, WINDOW_MS, SLIDE_MS)
    assert spans(shown) == ([995, 1_495], [5, 5], [1_000, 1_500])


def test_an_order_is_shown_by_whichever_of_its_windows_came_first() -> None:
    orders = [order(0, "a", "eu", 6_000)]
    received = [revision(15_000, "eu", 1, 9_000), revision(10_000, "eu", 1, 7_200)]
    [shown] = first_shown(orders, received, WINDOW_MS, SLIDE_MS)
    assert spans([shown]).to_received == [1_200]


def test_a_repeated_order_counts_once_and_other_regions_have_their_own_counts() -> None:
    orders = [order(0, "a", "eu", 6_000), order(1, "a", "eu", 6_000), order(2, "c", "us", 6_100),
              order(3, "b", "eu", 6_200)]
    received = [revision(10_000, "eu", 1, 7_000), revision(10_000, "us", 1, 7_000),
                revision(10_000, "eu", 2, 9_000)]
    shown = first_shown(orders, received, WINDOW_MS, SLIDE_MS)
    assert spans(shown).to_received == [1_000, 900, 2_800]


def test_an_order_no_revision_counted_is_not_shown() -> None:
    orders = [order(0, "a", "eu", 6_000), order(1, "b", "eu", 6_400)]
    shown = first_shown(orders, [revision(10_000, "eu", 1, 7_000)], WINDOW_MS, SLIDE_MS)
    assert [s.first is None for s in shown] == [False, True]
    assert spans(shown).to_received == [1_000]


def test_orders_from_two_partitions_are_refused() -> None:
    with pytest.raises(ValueError, match="more than one partition"):
        first_shown([order(0, "a", "eu", 6_000), order(0, "b", "eu", 6_000, partition=1)], [], WINDOW_MS, SLIDE_MS)


def test_a_revision_is_on_the_page_at_the_first_frame_that_drew_its_seq_or_a_later_one() -> None:
    received = [revision(10_000, "eu", n, 7_000 + n, seq=n) for n in (1, 2, 3, 4)]
    frames = [(1, 7_020), (3, 7_040), (3, 7_060)]  # seq 2 and 3 came in one frame; seq 4 was never drawn
    assert [(r.seq, r.received_ms) for r in drawn_at(received, frames)] == [(1, 7_020), (2, 7_040), (3, 7_040)]
    assert drawn_at(received, []) == []


def test_frames_from_more_than_one_epoch_are_refused() -> None:
    with pytest.raises(ValueError, match="more than one epoch"):
        drawn_at([revision(10_000, "eu", 1, 7_000, seq=1)], [(5, 7_100), (2, 7_200)])
