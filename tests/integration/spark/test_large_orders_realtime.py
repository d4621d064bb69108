"""The large-orders feed (``sparkwire.examples.large_orders``, Spark's real-time mode) end to end with real
Kafka, Spark and Redis while orders flow: its driver SIGKILLed in the middle of a long real-time batch and
started again, and its Redis (AOF, fsync always) SIGKILLed and restarted. Every large order's record is in the
log exactly once, in gap-free seqs, each entry as ``expected.py`` computes it from the produced orders alone;
the rows Spark sent again after the kill were refused, and counted."""

from __future__ import annotations

import json
import random
import sys
import threading
import time
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
import redis as redis_lib
from confluent_kafka import Producer

from sparkwire.examples.large_orders.expected import expected_feed, feed_differences
from sparkwire.examples.orders.expected import Order
from sparkwire.replaylog import ReplayLogReader
from sparkwire_harness.stack import KafkaBroker, ManagedProcess, RedisServer

pytestmark = pytest.mark.slow

THRESHOLD = Decimal("500")
REGIONS = ["eu-west", "us-east", "ap-south", None]  # None: a record that is not an order


class Orders:
    """Orders at a steady rate into a two-partition topic; the delivered ones kept with their positions."""

    def __init__(self, broker: KafkaBroker, topic: str) -> None:
        self.topic = topic
        self.producer = Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": True, "linger.ms": 5})
        self.orders: list[Order] = []
        self.sent = 0
        self.rng = random.Random(44)

    def send(self, count: int) -> None:
        for _ in range(count):
            n, region = self.sent, self.rng.choice(REGIONS)
            self.sent += 1
            amount = Decimal(self.rng.randint(100, 99_999)) / 100
            body: dict[str, Any] = ({"orderId": f"o-{n}", "amount": "oops"} if region is None else
                                    {"orderId": f"o-{n}", "region": region, "amount": str(amount),
                                     "ts": 1_764_000_000_000 + n})

            def delivered(error: Any, message: Any, body: dict[str, Any] = body) -> None:
                assert error is None, error
                if "region" in body:
                    self.orders.append(Order(message.partition(), message.offset(), body["orderId"], body["region"],
                                             Decimal(body["amount"]), body["ts"]))

            self.producer.produce(self.topic, key=body["orderId"].encode(), value=json.dumps(body).encode(),
                                  on_delivery=delivered)
            self.producer.poll(0)
        assert self.producer.flush(30) == 0


def test_every_large_order_exactly_once_through_a_driver_kill_and_a_redis_kill(
    kafka_broker: KafkaBroker, unique_name: str, tmp_path: Path,
) -> None:
    topic = f"{unique_name}-orders"
    kafka_broker.create_topic(topic, partitions=2)
    redis_server = RedisServer(tmp_path / "redis")
    redis_server.start()
    orders = Orders(kafka_broker, topic)
    env = {"LARGE_ORDERS_BOOTSTRAP_SERVERS": kafka_broker.bootstrap, "LARGE_ORDERS_TOPIC": topic,
           "LARGE_ORDERS_STREAM": unique_name, "LARGE_ORDERS_REDIS_URL": redis_server.url,
           "LARGE_ORDERS_CHECKPOINT": str(tmp_path / "checkpoint"), "LARGE_ORDERS_THRESHOLD": str(THRESHOLD),
           "LARGE_ORDERS_REALTIME_BATCH": "30 seconds"}  # long: the kill comes in the middle of a batch
    runs: list[ManagedProcess] = []

    def start() -> ManagedProcess:
        process = ManagedProcess(f"large-orders-{len(runs)}", [sys.executable, "-m", "sparkwire.examples.large_orders",
                                                              "run", "--master", "local[3]"], tmp_path, env=env)
        runs.append(process)
        process.start()
        return process

    reader = ReplayLogReader(redis_lib.Redis.from_url(redis_server.url), unique_name)
    stop = threading.Event()

    def produce() -> None:
        while not stop.is_set():
            orders.send(10)
            time.sleep(0.1)

    producer = threading.Thread(target=produce, daemon=True)
    try:
        first = start()
        producer.start()
        deadline = time.monotonic() + 120
        while reader.meta().last_seq < 20:  # rows flowing through the first run's real-time batch
            assert time.monotonic() < deadline and first.alive, first.log_tail(60)
            time.sleep(0.5)
        time.sleep(3)
        first.kill()  # SIGKILL: the batch's offsets never committed, its rows are sent again
        time.sleep(2)
        second = start()
        time.sleep(15)
        redis_server.kill()  # SIGKILL, then back from its AOF; the relay retries its commits meanwhile
        time.sleep(2)
        redis_server.start()
        time.sleep(10)
        stop.set()
        producer.join(30)
        expected = expected_feed(orders.orders, topic, THRESHOLD)
        deadline = time.monotonic() + 180
        while reader.meta().last_seq < len(expected):
            assert time.monotonic() < deadline and second.alive, (reader.meta().last_seq, len(expected),
                                                                  second.log_tail(60))
            time.sleep(0.5)
        time.sleep(3)  # anything more (a duplicate) is there by now
        entries = list(reader.iter_all())
        meta = reader.meta()
    finally:
        stop.set()
        for process in runs:
            if process.alive:
                process.stop(timeout=30)
        for process in runs:
            print(f"--- {process.name} (exit {process.returncode}) ---\n{process.log_tail(30)}")
        redis_server.stop()

    assert [entry.seq for entry in entries] == list(range(1, len(entries) + 1))  # gap-free
    problems = feed_differences([entry.data for entry in entries], expected)
    assert not problems, problems[:12]
    assert len(expected) > 300
    assert meta.counters.get("duplicates_suppressed", 0) > 0, meta.counters  # the kill's re-sent rows, refused
