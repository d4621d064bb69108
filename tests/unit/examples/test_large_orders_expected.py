"""The large-orders feed's oracle (``sparkwire.examples.large_orders.expected``): which records make entries,
and every way a delivered feed can differ from it."""

from __future__ import annotations

import json
from decimal import Decimal

from sparkwire.examples.large_orders.expected import (
    expected_feed,
    expected_fields,
    feed_differences,
    feed_fields,
    order_time,
)
from sparkwire.examples.orders.expected import Order

ORDERS = [Order(0, 5, "o-1", "eu-west", Decimal("500"), 1_764_000_000_123),
          Order(1, 7, "o-2", "us-east", Decimal("499.99"), 1_764_000_000_200),
          Order(1, 8, "o-1", "eu-west", Decimal("500"), 1_764_000_000_123)]  # o-1 sent twice: two records


def test_a_record_of_at_least_the_threshold_is_an_entry_named_by_its_position() -> None:
    expected = expected_feed(ORDERS, "orders", Decimal("500"))
    assert sorted(expected) == ["orders/0/5", "orders/1/8"]
    assert expected["orders/0/5"] == {"orderId": "o-1", "region": "eu-west", "amount": "500.00",
                                      "orderTime": "2025-11-24T16:00:00.123000Z", "topic": "orders",
                                      "partition": 0, "offset": 5}
    assert order_time(0) == "1970-01-01T00:00:00.000000Z"


def test_missing_extra_repeated_and_wrong_entries_are_each_named() -> None:
    expected = expected_feed(ORDERS, "orders", Decimal("500"))

    def entry(pid: str, **changes: object) -> str:
        return json.dumps({**expected.get(pid, {"orderId": "x"}), **changes, "processingId": pid})

    assert feed_differences([entry("orders/0/5"), entry("orders/1/8")], expected) == []
    problems = feed_differences([entry("orders/0/5"), entry("orders/0/5"), entry("orders/1/9"),
                                 entry("orders/0/5", amount="5.00")], expected)
    assert problems[0] == "delivered twice: orders/0/5"
    assert problems[1].startswith("not expected: orders/1/9")
    assert problems[2] == "delivered twice: orders/0/5"
    assert problems[3] == "missing: orders/1/8"
    assert feed_differences([entry("orders/1/8", region="us-east")], expected)[0].startswith("wrong: orders/1/8")


def test_without_positions_each_record_counts_once_and_a_repeat_twice() -> None:
    records = [{"orderId": "o-1", "region": "eu-west", "amount": "500", "ts": 0},
               {"orderId": "o-1", "region": "eu-west", "amount": "500", "ts": 0},
               {"orderId": "o-2", "region": "eu-west", "amount": "12.5", "ts": 0},
               {"orderId": "bad-1", "amount": "not a number"}]
    fields = expected_fields(records, Decimal("500"))
    assert fields == {("o-1", "eu-west", "500.00", "1970-01-01T00:00:00.000000Z"): 2}
    assert feed_fields({"orderId": "o-1", "region": "eu-west", "amount": "500.00",
                        "orderTime": "1970-01-01T00:00:00.000000Z", "offset": 3}) in fields
