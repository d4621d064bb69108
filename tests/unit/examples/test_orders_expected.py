"""The orders example's oracle: sliding windows, each orderId once, the late rule, revisions per batch."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

from sparkwire.examples.orders.expected import (
    Order,
    cents,
    expected_final,
    expected_revisions,
    iso,
    latest,
    windows_of,
)
from sparkwire.examples.orders.produce import generate
from sparkwire.spark.rebuild.checkpoint import BatchInput


def test_an_order_falls_in_every_sliding_window_that_holds_it() -> None:
    assert windows_of(12_500, 10_000, 5_000) == [(5_000, 15_000), (10_000, 20_000)]
    assert windows_of(10_000, 10_000, 5_000) == [(5_000, 15_000), (10_000, 20_000)]
    assert windows_of(3_000, 2_000, 1_000) == [(2_000, 4_000), (3_000, 5_000)]


def order(offset: int, order_id: str, region: str, amount: str, ts: int) -> Order:
    return Order(0, offset, order_id, region, Decimal(amount), ts)


def test_revisions_per_batch_count_each_order_once_and_drop_late_ones() -> None:
    orders = [order(0, "a", "eu", "1.50", 1_000), order(1, "b", "eu", "2", 1_500), order(2, "a", "eu", "1.50", 1_000),
              order(3, "c", "eu", "4", 1_200), order(4, "d", "us", "1", 1_000)]
    batches = [BatchInput(0, 0, 0, {0: 0}, {0: 2}), BatchInput(1, 0, 1_100, {0: 2}, {0: 5})]
    revisions = expected_revisions(orders, batches, 2_000, 1_000)
    first = revisions[0][(iso(1_000), "eu")]
    assert (first.orders, first.revenue, first.largest) == (2, "3.50", "2.00")
    # Batch 1 (late watermark 1100): the repeat of "a" counts nothing, "c" (1200) is on time, "d" (1000) is late.
    second = revisions[1][(iso(1_000), "eu")]
    assert (second.orders, second.revenue, second.largest) == (3, "7.50", "4.00")
    assert (iso(1_000), "us") not in revisions[1] and set(revisions[1]) == {(iso(0), "eu"), (iso(1_000), "eu")}
    assert cents(Decimal("7.5")) == "7.50"


def test_the_final_values_do_not_depend_on_how_batches_cut_the_input() -> None:
    records = generate(seed=3, count=400, start_ms=1_764_000_000_000, rate=50)
    orders = [order(i, str(r["orderId"]), str(r["region"]), str(r["amount"]), int(r["ts"]))
              for i, r in enumerate(records) if "region" in r]
    cuts = [0, 97, 250, len(records)]  # offsets of every record sent: the last orders sit past len(orders)
    batches = [BatchInput(b, 0, -1, {0: cuts[b]}, {0: cuts[b + 1]}) for b in range(3)]
    final = expected_final(records, 10_000, 5_000)
    assert latest(expected_revisions(orders, batches, 10_000, 5_000)) == final
    # Independently: each result counts the distinct orders of its region in its window, the last ones too.
    distinct = {str(r["orderId"]): r for r in records if "region" in r}
    for (start, region), revision in final.items():
        begin = int(dt.datetime.fromisoformat(start).timestamp() * 1000)
        assert revision.orders == sum(1 for r in distinct.values()
                                      if r["region"] == region and begin <= int(r["ts"]) < begin + 10_000)
    assert sum(r.orders for r in final.values()) == 2 * len(distinct)  # sliding by half: each order in 2 windows
    assert generate(seed=3, count=400, start_ms=1_764_000_000_000, rate=50) == records
    assert any(r.get("amount") == "not a number" for r in records) or len(records) > 400
