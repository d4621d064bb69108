"""What the large-orders feed must deliver, from the produced orders alone (plain Python, no Spark): one
entry per Kafka record of a valid order of at least the threshold, its id the record's position."""

from __future__ import annotations

import datetime as dt
import json
from collections import Counter
from collections.abc import Iterable, Mapping
from decimal import Decimal
from typing import Any

from sparkwire.examples.orders.expected import Order

_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


def order_time(ts_ms: int) -> str:
    moment = _EPOCH + dt.timedelta(milliseconds=ts_ms)
    return moment.replace(tzinfo=None).isoformat(timespec="microseconds") + "Z"


def expected_feed(orders: Iterable[Order], topic: str, threshold: Decimal) -> dict[str, dict[str, Any]]:
    """processingId (``<topic>/<partition>/<offset>``) -> the entry's payload fields."""
    return {
        f"{topic}/{order.partition}/{order.offset}": {
            "orderId": order.order_id, "region": order.region, "amount": f"{order.amount:.2f}",
            "orderTime": order_time(order.ts_ms), "topic": topic, "partition": order.partition, "offset": order.offset,
        }
        for order in orders if order.amount >= threshold
    }


def feed_differences(payloads: Iterable[str], expected: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """Every way the delivered payloads (in seq order) differ from ``expected``: a missing, extra, repeated or
    wrong entry."""
    problems: list[str] = []
    seen: set[str] = set()
    for text in payloads:
        payload = json.loads(text)
        pid = payload.pop("processingId", None)
        if pid in seen:
            problems.append(f"delivered twice: {pid}")
        elif pid not in expected:
            problems.append(f"not expected: {pid} {payload}")
        elif payload != dict(expected[pid]):
            problems.append(f"wrong: {pid} {payload} != {dict(expected[pid])}")
        seen.add(str(pid))
    problems.extend(f"missing: {pid}" for pid in sorted(set(expected) - seen))
    return problems


def feed_fields(payload: Mapping[str, Any]) -> tuple[str, str, str, str]:
    """What a feed entry says of its order, without its position: (orderId, region, amount, orderTime)."""
    return str(payload["orderId"]), str(payload["region"]), str(payload["amount"]), str(payload["orderTime"])


def expected_fields(records: Iterable[Mapping[str, Any]], threshold: Decimal) -> Counter[tuple[str, str, str, str]]:
    """The entries the feed must hold for the records sent (``orders.produce.generate``'s, positions unknown):
    one per record of a valid order of at least ``threshold`` — an order sent twice is there twice."""
    found: Counter[tuple[str, str, str, str]] = Counter()
    for record in records:
        if "region" in record and Decimal(str(record["amount"])) >= threshold:
            found[(str(record["orderId"]), str(record["region"]), f"{Decimal(str(record['amount'])):.2f}",
                   order_time(int(record["ts"])))] += 1
    return found
