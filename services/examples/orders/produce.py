"""``python -m sparkwire.examples.orders.produce``: live orders into Kafka for the demo and the chaos run.

Each order is sent with its orderId as the key (idempotent producer); about 2 % are sent twice and 1 % of
the records are not orders at all. Every delivered record is appended to ``--orders-file`` with its Kafka
position, which is what :func:`load_orders` gives ``expected.expected_revisions``.
"""

from __future__ import annotations

import argparse
import json
import random
import time
from decimal import Decimal
from pathlib import Path
from typing import Any

from sparkwire.examples.orders.expected import Order

REGIONS = ("eu-west", "us-east", "ap-south", "sa-east")


def load_orders(path: Path) -> list[Order]:
    """The delivered orders of an ``--orders-file`` (records that are not orders left out)."""
    orders = []
    for line in path.read_text().splitlines():
        record = json.loads(line)
        body = json.loads(record["value"])
        if "region" in body:
            orders.append(Order(record["partition"], record["offset"], body["orderId"], body["region"],
                                Decimal(body["amount"]), body["ts"]))
    return orders


def main(argv: list[str] | None = None) -> int:
    from confluent_kafka import Producer

    parser = argparse.ArgumentParser(prog="python -m sparkwire.examples.orders.produce", description=__doc__)
    parser.add_argument("--bootstrap-servers", default="127.0.0.1:9092")
    parser.add_argument("--topic", default="orders")
    parser.add_argument("--rate", type=float, default=20.0, help="orders per second")
    parser.add_argument("--duration", type=float, default=60.0, help="seconds to produce for")
    parser.add_argument("--orders-file", type=Path, required=True, help="JSON lines of every delivered record")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)

    rng = random.Random(args.seed)
    producer = Producer({"bootstrap.servers": args.bootstrap_servers, "enable.idempotence": True})
    with args.orders_file.open("a") as out:

        def delivered(error: Any, message: Any) -> None:
            if error is None:
                out.write(json.dumps({"partition": message.partition(), "offset": message.offset(),
                                      "value": message.value().decode()}) + "\n")

        started, n = time.monotonic(), 0
        while time.monotonic() - started < args.duration:
            order = {"orderId": f"o-{args.seed}-{n}", "region": rng.choice(REGIONS),
                     "amount": str((Decimal(rng.randint(100, 99_999)) / 100).quantize(Decimal("0.01"))),
                     "ts": int(time.time() * 1000)}
            bodies = [order, order] if rng.random() < 0.02 else [order]
            if rng.random() < 0.01:
                bodies.append({"orderId": f"bad-{n}", "amount": "not a number"})
            for body in bodies:
                producer.produce(args.topic, key=str(body["orderId"]).encode(), value=json.dumps(body).encode(),
                                 on_delivery=delivered)
            producer.poll(0)
            n += 1
            time.sleep(max(0.0, started + n / args.rate - time.monotonic()))
        remaining = producer.flush(30)
    return 0 if remaining == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
