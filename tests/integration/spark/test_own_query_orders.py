"""The orders example (a team's own query, update mode, sliding windows, decimals) end to end with real Kafka,
Spark and Redis: every revision of every result exactly once and in order, through a driver SIGKILLed after a
commit, and rebuilt after its log was lost.

The expected revisions come from ``sparkwire.examples.orders.expected``: plain Python over the produced
orders and the batch ranges in the checkpoint; no Spark.
"""

from __future__ import annotations

import json
import random
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
import redis as redis_lib
from confluent_kafka import Producer

from sparkwire.examples.orders.expected import (
    Order,
    Revisions,
    committed_batches,
    delivered_revisions,
    differences,
    expected_revisions,
    latest,
)
from sparkwire.replaylog import ReplayLogReader
from sparkwire.spark.rebuild.checkpoint import read_history
from sparkwire_harness.stack import KafkaBroker, ManagedProcess, RedisServer

pytestmark = pytest.mark.slow

WINDOW_MS, SLIDE_MS, DELAY_MS = 2_000, 1_000, 1_000
START_MS = 1_764_000_000_000
REGIONS = ["eu-west", "us-east", "ap-south", "sa-east"]


@dataclass
class OrdersRun:
    name: str
    workdir: Path
    kafka: KafkaBroker
    redis_server: RedisServer
    orders: list[Order] = field(default_factory=list)
    runs: list[ManagedProcess] = field(default_factory=list)
    produced: int = 0

    @property
    def topic(self) -> str:
        return f"{self.name}-orders"

    @property
    def checkpoint(self) -> Path:
        return self.workdir / "checkpoint"

    @property
    def reader(self) -> ReplayLogReader:
        return ReplayLogReader(redis_lib.Redis.from_url(self.redis_server.url), self.name)

    def produce(self, count: int, rng: random.Random) -> None:
        """``count`` orders 10 ms of event time apart, about 3 % repeated and 1 % malformed records."""
        producer = Producer({"bootstrap.servers": self.kafka.bootstrap, "enable.idempotence": True})
        sent: list[tuple[str, dict[str, Any]]] = []
        for _ in range(count):
            n = self.produced
            self.produced += 1
            order = {"orderId": f"o-{n}", "region": rng.choice(REGIONS),
                     "amount": str(Decimal(rng.randint(100, 99_999)) / 100), "ts": START_MS + n * 10}
            sent.append((order["orderId"], order))
            if rng.random() < 0.03:
                sent.append((order["orderId"], order))  # a repeat: the same order again, same key
            if rng.random() < 0.01:
                sent.append((f"bad-{n}", {"orderId": f"bad-{n}", "amount": "not a number"}))

        def delivered(error: Any, message: Any) -> None:
            assert error is None, error
            body = json.loads(message.value())
            if "region" in body:
                self.orders.append(Order(message.partition(), message.offset(), body["orderId"], body["region"],
                                         Decimal(body["amount"]), body["ts"]))

        for key, body in sent:
            producer.produce(self.topic, key=key.encode(), value=json.dumps(body).encode(), on_delivery=delivered)
            producer.poll(0)
        assert producer.flush(30) == 0

    def environment(self) -> dict[str, str]:
        return {"ORDERS_BOOTSTRAP_SERVERS": self.kafka.bootstrap, "ORDERS_TOPIC": self.topic,
                "ORDERS_STREAM": self.name, "ORDERS_REDIS_URL": self.redis_server.url,
                "ORDERS_CHECKPOINT": str(self.checkpoint),
                "ORDERS_WINDOW_MS": str(WINDOW_MS), "ORDERS_SLIDE_MS": str(SLIDE_MS),
                "ORDERS_WATERMARK_DELAY_MS": str(DELAY_MS), "ORDERS_TRIGGER_MS": "300",
                "ORDERS_MAX_OFFSETS_PER_TRIGGER": "120"}

    def start(self, fault: str | None = None) -> ManagedProcess:
        env = self.environment()
        if fault:
            env["SPARKWIRE_FAULT"] = fault
        command = [sys.executable, "-m", "sparkwire.examples.orders", "run"]
        process = ManagedProcess(f"orders-{len(self.runs)}", command, self.workdir, env=env)
        self.runs.append(process)
        process.start()
        return process

    def wait_until_read(self, timeout: float = 240) -> None:
        """Until a committed batch has read every produced record (its results are in the log by then: the
        sink commits before Spark writes the batch to the commit log)."""
        ends: dict[int, int] = {}
        for order in self.orders:
            ends[order.partition] = max(ends.get(order.partition, 0), order.offset + 1)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.checkpoint.joinpath("metadata").exists():
                history = read_history(self.checkpoint, self.topic)
                done = [b for b in history.batches if b.batch_id <= history.committed]
                if done and all(done[-1].end.get(p, 0) >= end for p, end in ends.items()):
                    return
            assert self.runs[-1].alive, self.runs[-1].log_tail(60)
            time.sleep(0.5)
        raise AssertionError(f"the job did not read every order in {timeout}s:\n{self.runs[-1].log_tail(40)}")

    def wait_until_idle(self, quiet_s: float = 4.0, timeout: float = 120) -> None:
        """Until every planned batch is committed and none came for ``quiet_s`` (ten triggers): the job ran
        its last batch, the no-data one that moves the watermark included, and waits for new input."""
        def newest(folder: str) -> int:
            names = [int(p.name) for p in (self.checkpoint / folder).iterdir() if p.name.isdigit()]
            return max(names, default=-1)

        deadline, seen, since = time.monotonic() + timeout, (-2, -2), time.monotonic()
        while time.monotonic() - since < quiet_s:
            assert time.monotonic() < deadline and self.runs[-1].alive, self.runs[-1].log_tail(40)
            now = (newest("offsets"), newest("commits"))
            if now != seen or now[0] != now[1]:
                seen, since = now, time.monotonic()
            time.sleep(0.3)

    def expected(self) -> Revisions:
        return expected_revisions(self.orders, committed_batches(self.checkpoint, self.topic), WINDOW_MS, SLIDE_MS)


@pytest.fixture
def orders_run(kafka_broker: KafkaBroker, redis_server: RedisServer, unique_name: str, tmp_path: Path,
               request: pytest.FixtureRequest) -> Iterator[OrdersRun]:
    kafka_broker.create_topic(f"{unique_name}-orders", partitions=2)
    run = OrdersRun(unique_name, tmp_path, kafka_broker, redis_server)
    yield run
    for process in run.runs:
        if process.alive:
            process.stop(timeout=30)
    report = getattr(request.node, "rep_call", None)
    if report is not None and report.failed:
        for process in run.runs:
            print(f"--- {process.name} (exit {process.returncode}) ---\n{process.log_tail(60)}")


def test_own_query_every_revision_exactly_once_through_a_driver_kill(orders_run: OrdersRun) -> None:
    rng = random.Random(17)
    orders_run.produce(900, rng)
    first = orders_run.start(fault="after-commit@3")  # SIGKILL once batch 3 is in the log, before Spark knows
    deadline = time.monotonic() + 180
    while first.alive:
        assert time.monotonic() < deadline, first.log_tail(40)
        time.sleep(0.3)
    assert first.returncode != 0
    orders_run.start()
    orders_run.produce(900, rng)
    orders_run.wait_until_read()

    expected = orders_run.expected()
    entries = list(orders_run.reader.iter_all())
    meta = orders_run.reader.meta()
    assert [e.seq for e in entries] == list(range(1, len(entries) + 1))  # gap-free
    found, problems = delivered_revisions(entries)
    assert not problems, problems[:10]
    assert not differences(found, expected), "\n".join(differences(found, expected)[:12])
    assert sum(len(r) for r in found.values()) == len(entries) > 100
    assert len(latest(found)) > 50 and meta.counters.get("chunks_replayed", 0) >= 1  # batch 3 came again
    descriptor = json.loads(redis_lib.Redis.from_url(orders_run.redis_server.url).get(
        f"sparkwire:{{{orders_run.name}}}:descriptor") or b"{}")
    assert (descriptor["mode"], descriptor["revisions"], descriptor["rebuild"]) == ("update", True, "available")


def test_own_query_log_lost_is_rebuilt_with_the_latest_revisions(orders_run: OrdersRun) -> None:
    rng = random.Random(29)
    orders_run.produce(900, rng)
    run = orders_run.start()
    orders_run.wait_until_read()
    before = orders_run.reader.meta()
    client = redis_lib.Redis.from_url(orders_run.redis_server.url)
    client.delete(*client.keys(f"sparkwire:{{{orders_run.name}}}:*"))  # the log lost, as after a FLUSHALL
    orders_run.produce(900, rng)
    orders_run.wait_until_read()
    assert run.alive and len(orders_run.runs) == 1  # rebuilt inside the running job

    meta = orders_run.reader.meta()
    entries = list(orders_run.reader.iter_all())
    assert meta.epoch != before.epoch and meta.counters.get("rebuilds") == 1
    assert "history_lost" not in meta.counters
    expected = orders_run.expected()
    found, problems = delivered_revisions(entries)
    assert not problems, problems[:10]
    # The new epoch holds the latest value of every result, and every later revision exactly.
    assert latest(found) == latest(expected)
    rebuilt_at = min(found)
    assert not differences(found, expected, [b for b in set(found) | set(expected) if b > rebuilt_at])
    assert client.get(f"sparkwire:{{{orders_run.name}}}:descriptor") is not None  # written again

    # Lost again while the job is down, with no order after it: the restarted job rebuilds the log before its
    # query starts (Spark runs no micro-batch until new input comes, so a first batch would never see it).
    orders_run.wait_until_idle()
    run.stop(timeout=60)
    client.delete(*client.keys(f"sparkwire:{{{orders_run.name}}}:*"))
    restarted = orders_run.start()
    deadline = time.monotonic() + 180
    found, problems = delivered_revisions(list(orders_run.reader.iter_all()))
    while latest(found) != latest(expected):  # the rebuild marks the epoch first, then recommits
        assert restarted.alive and time.monotonic() < deadline, restarted.log_tail(60)
        time.sleep(1)
        found, problems = delivered_revisions(list(orders_run.reader.iter_all()))
    assert not problems, problems[:10]
    assert orders_run.reader.meta().counters.get("rebuilds") == 1
    assert client.get(f"sparkwire:{{{orders_run.name}}}:descriptor") is not None


def test_own_query_sparkwire_rebuild_recomputes_a_user_stream_by_hand(orders_run: OrdersRun) -> None:
    """The job stopped and its log lost: ``sparkwire rebuild --job`` recommits the newest revision of every
    result from Kafka and the job's checkpoint, as the metrics job's is rebuilt."""
    orders_run.produce(900, random.Random(41))
    run = orders_run.start()
    orders_run.wait_until_read()
    run.stop(timeout=60)
    client = redis_lib.Redis.from_url(orders_run.redis_server.url)
    client.delete(*client.keys(f"sparkwire:{{{orders_run.name}}}:*"))
    env = {key: value for key, value in orders_run.environment().items() if key.startswith("ORDERS_")}
    rebuild = ManagedProcess("rebuild", [
        sys.executable, "-m", "sparkwire.cli", "rebuild", "--job", "sparkwire.examples.orders.job:job_from_environment",
    ], orders_run.workdir, env=env)
    rebuild.start()
    deadline = time.monotonic() + 240
    while rebuild.alive:
        assert time.monotonic() < deadline, rebuild.log_tail(40)
        time.sleep(0.5)
    assert rebuild.returncode == 0, rebuild.log_tail(40)
    assert "history complete" in rebuild.log_tail(20)

    found, problems = delivered_revisions(list(orders_run.reader.iter_all()))
    assert not problems, problems[:10]
    assert latest(found) == latest(orders_run.expected()) and len(found) == 1  # one batch: upto - 1
    assert orders_run.reader.meta().counters.get("rebuilds") == 1
