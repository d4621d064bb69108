"""``python -m sparkwire.examples.orders.produce``: live orders into Kafka for the demo and the chaos run.

Each order is sent with its orderId as the key (idempotent producer); about 2 % are sent twice and 1 % of
the records are not orders at all. Every delivered record is appended to ``--orders-file`` with its Kafka
position, which is what :func:`load_orders` gives ``expected.expected_revisions``.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from decimal import Decimal
from pathlib import Path
from typing import Any

from sparkwire.examples.orders.expected import Order
from sparkwire.options import add_renamed_seconds, non_negative_float, non_negative_int

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


def generate(seed: int, count: int, start_ms: int, rate: float) -> list[dict[str, Any]]:
    """``count`` orders with event times ``start_ms + n / rate`` and the records sent for them, in send
    order (a repeat right after its order, a malformed record now and then): the same for the same arguments,
    so a test can compute what the job must deliver without reading Kafka."""
    rng = random.Random(seed)
    records: list[dict[str, Any]] = []
    for n in range(count):
        order = {"orderId": f"o-{seed}-{n}", "region": rng.choice(REGIONS),
                 "amount": str((Decimal(rng.randint(100, 99_999)) / 100).quantize(Decimal("0.01"))),
                 "ts": start_ms + int(n * 1000 / rate)}
        records += [order, order] if rng.random() < 0.02 else [order]
        if rng.random() < 0.01:
            records.append({"orderId": f"bad-{seed}-{n}", "amount": "not a number"})
    return records


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sparkwire.examples.orders.produce", description=__doc__)
    parser.add_argument("--bootstrap-servers", default="127.0.0.1:9092")
    parser.add_argument("--topic", default="orders")
    parser.add_argument("--rate", type=non_negative_float, default=20.0, help="orders per second")
    parser.add_argument("--duration-ms", type=non_negative_int, default=60_000, help="how long to produce for")
    add_renamed_seconds(parser, "--duration", "--duration-ms")
    parser.add_argument("--orders-file", type=Path, help="JSON lines of every delivered record (with its position)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--count", type=int, default=0,
                        help="send exactly this many orders (see generate), at --rate, instead of --duration-ms")
    parser.add_argument("--start-ms", type=int, default=0,
                        help="with --count: event time of the first order (default: now)")
    args = parser.parse_args(argv)
    if args.count:
        return _send_counted(args)

    if args.orders_file is None:
        parser.error("--orders-file is needed with --duration-ms: name the file that records every delivered "
                     "order (or give --count)")
    rng = random.Random(args.seed)
    producer = connected_producer(args.bootstrap_servers, args.topic)
    with args.orders_file.open("a") as out:

        def delivered(error: Any, message: Any) -> None:
            if error is None:
                out.write(json.dumps({"partition": message.partition(), "offset": message.offset(),
                                      "value": message.value().decode()}) + "\n")

        started, n = time.monotonic(), 0
        while time.monotonic() - started < args.duration_ms / 1000:
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


def connected_producer(bootstrap_servers: str, topic: str) -> Any:
    """An idempotent producer that has reached the cluster (``topic``'s metadata read) before any order is
    stamped: a new one holds its first records until it has connected and learned the topic, about a second
    here, so orders stamped meanwhile carried a time up to a second before they could leave (the first orders
    of each run were the real-time benchmark's whole p99). A cluster not reached in 30 s (a broker failing over)
    is not an error here: the producer queues and retries, as it always did."""
    from confluent_kafka import KafkaException, Producer

    producer = Producer({"bootstrap.servers": bootstrap_servers, "enable.idempotence": True})
    try:
        producer.list_topics(topic, timeout=30)
    except KafkaException as error:
        print(f"the Kafka cluster was not reached in 30 s ({error}); sending anyway", file=sys.stderr)
    return producer


def _send_counted(args: argparse.Namespace) -> int:
    """``generate``'s records, paced at ``--rate`` orders per second of wall time."""
    producer = connected_producer(args.bootstrap_servers, args.topic)
    failed: list[str] = []

    def delivered(error: Any, _message: Any) -> None:
        if error is not None:
            failed.append(str(error))

    started = time.monotonic()
    start_ms = args.start_ms or int(time.time() * 1000)
    for record in generate(args.seed, args.count, start_ms, args.rate):
        if "ts" in record:
            time.sleep(max(0.0, started + (record["ts"] - start_ms) / 1000 - time.monotonic()))
        producer.produce(args.topic, key=str(record["orderId"]).encode(), value=json.dumps(record).encode(),
                         on_delivery=delivered)
        producer.poll(0)
    remaining = producer.flush(60)
    print(json.dumps({"sent": args.count, "startMs": start_ms, "failed": failed[:5], "undelivered": remaining}))
    return 0 if remaining == 0 and not failed else 1


if __name__ == "__main__":
    raise SystemExit(main())
