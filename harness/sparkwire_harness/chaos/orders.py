"""The orders example in a chaos run: a team's own job (``sparkwire.examples.orders``, update mode) beside the
metrics aggregator, under the same faults — its driver is SIGKILLed with the aggregator's, its links to Redis
and Kafka cross the same proxies, its clients connect through the same edges and gateways.

Checked at the end: the log holds exactly the revisions computed from the produced orders and the job's
batches (``sparkwire.examples.orders.expected``), and every orders client applied every revision of the log
exactly once, in seq order.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field

from sparkwire.client import BackgroundClient
from sparkwire.examples.orders.expected import committed_batches, delivered_revisions, differences, expected_revisions
from sparkwire.examples.orders.produce import load_orders
from sparkwire.gateway.auth.tokens import issue_token
from sparkwire.replaylog import ReplayLogReader
from sparkwire_harness.chaos.pipeline import SupervisedAggregator
from sparkwire_harness.chaos.topology import ORDERS, Topology
from sparkwire_harness.stack import ManagedProcess

WINDOW_MS, SLIDE_MS = 4_000, 2_000
RETAIN_BATCHES = 100_000
RATE = 10.0  # orders per second: the point is faults on a second job, not its load
CLIENTS = 4


@dataclass
class SupervisedOrders(SupervisedAggregator):
    name = "orders-job"

    def command(self) -> list[str]:
        return [sys.executable, "-m", "sparkwire.examples.orders", "run", "--log-level", "WARNING"]

    def environment(self) -> dict[str, str]:
        topology = self.topology
        redis_url, redis_env = topology.redis_access("spark-redis")
        # The check recomputes every revision from the offsets of every batch the job ran (its checkpoint);
        # Spark keeps only the last 100 batches' (spark.sql.streaming.minBatchesToRetain), fewer than a
        # 10-minute run makes.
        retain = f"--conf spark.sql.streaming.minBatchesToRetain={RETAIN_BATCHES} pyspark-shell"
        return {**redis_env, **topology.spark_scratch(), "PYSPARK_SUBMIT_ARGS": retain,
                "ORDERS_BOOTSTRAP_SERVERS": topology.kafka.spark_bootstrap, "ORDERS_TOPIC": ORDERS,
                "ORDERS_STREAM": ORDERS, "ORDERS_REDIS_URL": redis_url,
                "ORDERS_CHECKPOINT": str(topology.workdir / "checkpoint-orders"),
                "ORDERS_WINDOW_MS": str(WINDOW_MS), "ORDERS_SLIDE_MS": str(SLIDE_MS),
                "ORDERS_WATERMARK_DELAY_MS": str(self.settings.delay_ms),
                "ORDERS_TRIGGER_MS": str(self.settings.trigger_ms)}


@dataclass
class OrdersCheck:
    ok: bool
    lines: list[str] = field(default_factory=list)


@dataclass
class OrdersSide:
    topology: Topology
    driver: SupervisedOrders
    clients: list[BackgroundClient] = field(default_factory=list)
    producer: ManagedProcess | None = None

    @property
    def orders_file(self) -> str:
        return str(self.topology.workdir / "orders.jsonl")

    def start_clients(self, secret: str, ttl: int, edges: list[str]) -> None:
        for index in range(CLIENTS):
            token = issue_token(secret, [ORDERS], ttl, subject=f"orders-client-{index}", now=int(time.time()))
            edge = edges[index % len(edges)]
            self.clients.append(BackgroundClient(self.topology.edge_ws(edge, ORDERS), token=token,
                                                 keep_applied=True).start())

    def start_producer(self, seconds: float, seed: int) -> None:
        self.producer = ManagedProcess("orders-producer", [
            sys.executable, "-m", "sparkwire.examples.orders.produce", "--bootstrap-servers",
            self.topology.kafka.bootstrap, "--topic", ORDERS, "--rate", str(RATE),
            "--duration-ms", str(round(seconds * 1000)),
            "--seed", str(seed), "--orders-file", self.orders_file,
        ], self.topology.workdir)  # fmt: skip
        self.producer.start()

    def check(self, timeout: float = 180) -> OrdersCheck:
        """Wait until the job has read every order and every client holds the log's head, then compare."""
        orders = load_orders(self.topology.workdir / "orders.jsonl")
        ends: dict[int, int] = {}
        for order in orders:
            ends[order.partition] = max(ends.get(order.partition, 0), order.offset + 1)
        checkpoint = self.topology.workdir / "checkpoint-orders"
        deadline = time.monotonic() + timeout
        batches = committed_batches(checkpoint, ORDERS)
        while not (batches and all(batches[-1].end.get(p, 0) >= end for p, end in ends.items())):
            if time.monotonic() > deadline:
                return OrdersCheck(False, [f"orders: the job did not read every order within {timeout:.0f}s"])
            time.sleep(1.0)
            batches = committed_batches(checkpoint, ORDERS)
        reader = ReplayLogReader(self.topology.redis_client(), ORDERS)
        entries = list(reader.iter_all())
        log = [(entry.seq, entry.processing_id) for entry in entries]
        while time.monotonic() < deadline and any(c.client.applied[-1:] != log[-1:] for c in self.clients):
            time.sleep(0.5)
        found, problems = delivered_revisions(entries)
        wrong = problems + differences(found, expected_revisions(orders, batches, WINDOW_MS, SLIDE_MS))
        lines = [f"orders: {len(orders)} orders, {len(entries)} revisions in the log over {len(batches)} batches, "
                 f"{len(wrong)} wrong (epoch {reader.meta().epoch}, driver exits {len(self.driver.exits)})"]
        lines += [f"orders problem: {line}" for line in wrong[:10]]
        clients_ok = True
        for index, background in enumerate(self.clients):
            client = background.client
            stats = client.stats()
            if client.applied != log or stats.duplicates or stats.gaps:
                clients_ok = False
                lines.append(f"orders client {index}: {len(client.applied)} of {len(log)} revisions applied in log "
                             f"order: {client.applied == log}, duplicates {stats.duplicates}, gaps {stats.gaps}")
        return OrdersCheck(not wrong and clients_ok and len(entries) > 0, lines)

    def stop(self) -> None:
        for background in self.clients:
            background.stop()
        if self.producer is not None:
            self.producer.stop()
        self.driver.stop()
