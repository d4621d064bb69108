"""The orders example in a chaos run: a team's own job (``sparkwire.examples.orders``, update mode) beside the
metrics aggregator, under the same faults — its driver is SIGKILLed with the aggregator's, its links to Redis
and Kafka cross the same proxies, its clients connect through the same edges and gateways.

Checked at the end: the log holds exactly the revisions computed from the produced orders and the job's
batches (``sparkwire.examples.orders.expected``), and every orders client applied every revision of the log
exactly once, in seq order. Beside them, one filtered or scoped client per ``views.ORDER_PROFILES`` profile,
each against its own oracle (``views.update_oracle`` over those checked revisions): every revision its view
admits applied once in seq order, a removal once each time a key it holds moves out of its filter, nothing
outside its scope, and at the end the view's newest revision per key.
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import dataclass, field

from sparkwire.client import BackgroundClient
from sparkwire.examples.orders.expected import committed_batches, delivered_revisions, differences, expected_revisions
from sparkwire.examples.orders.produce import load_orders
from sparkwire.gateway.auth.tokens import issue_token
from sparkwire.replaylog import Entry, ReplayLogReader
from sparkwire_harness.chaos import views
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
class FilteredOrdersClient:
    """A filtered or scoped orders client, and the removals it got ([seq, key] of each key it dropped)."""

    profile: views.Profile
    background: BackgroundClient
    removals: list[tuple[int, str]] = field(default_factory=list)


def sequence_problems(got: list[tuple[int, str]], want: list[tuple[int, str]], what: str) -> list[str]:
    """``got`` against ``want`` (both (seq, item) in the order applied): the first extra, repeated, missing
    item, or one out of order."""
    problems = []
    wanted, seen = set(want), set()
    for index, item in enumerate(got):
        if item in seen:
            problems.append(f"{what} at seq {item[0]} ({item[1]}) applied twice")
        elif item not in wanted:
            problems.append(f"{what} at seq {item[0]} ({item[1]}) applied, which its oracle does not hold")
        elif index and item[0] <= got[index - 1][0]:
            problems.append(f"{what} at seq {item[0]} applied after seq {got[index - 1][0]}")
        seen.add(item)
    missing = [item for item in want if item not in seen]
    if missing:
        problems.append(f"{len(missing)} {what}s of its oracle never applied, the first at seq {missing[0][0]} "
                        f"({missing[0][1]})")
    return problems


def check_filtered(filtered: FilteredOrdersClient, entries: list[Entry]) -> list[str]:
    """One filtered orders client against its oracle: the problems, or none."""
    profile, client = filtered.profile, filtered.background.client
    rows = [(e.seq, e.processing_id, e.key, json.loads(e.data)) for e in entries]
    oracle = views.update_oracle(profile, rows)
    by_seq = {row[0]: row for row in rows}
    problems = sequence_problems([(seq, pid) for seq, pid in client.applied], oracle.entries, "revision")
    for seq, _pid in client.applied:
        row = by_seq.get(seq)
        if row is not None and not views.admits(profile.scope, row[2], row[3]):
            problems.insert(0, f"revision at seq {seq} ({row[2]}) applied, outside its scope")
    problems += sequence_problems(filtered.removals, oracle.removals, "removal")
    state = {key: (item.seq, item.processing_id) for key, item in client.state.items()}
    if state != oracle.state:
        problems.append(f"holds {sorted(state.items())} at the end, its oracle {sorted(oracle.state.items())}")
    stats = client.stats()
    resets = {reason: n for reason, n in stats.resets.items() if reason != "no_position"}
    if stats.duplicates or stats.gaps or resets:
        problems.append(f"counted {stats.duplicates} duplicates, {stats.gaps} gaps, resets {resets}")
    return problems


@dataclass
class OrdersSide:
    topology: Topology
    driver: SupervisedOrders
    clients: list[BackgroundClient] = field(default_factory=list)
    filtered: list[FilteredOrdersClient] = field(default_factory=list)
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
        for index, profile in enumerate(views.ORDER_PROFILES):
            token = views.token(secret, ORDERS, profile, ttl, subject=f"orders-filtered-{index}")
            removals: list[tuple[int, str]] = []
            background = BackgroundClient(self.topology.edge_ws(edges[index % len(edges)], ORDERS), token=token,
                                          keep_applied=True, filter=profile.filter,
                                          on_removal=lambda removal, into=removals: into.append((removal.seq,
                                                                                                  removal.key)))
            self.filtered.append(FilteredOrdersClient(profile, background.start(), removals))

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
        head = log[-1][0] if log else 0
        while time.monotonic() < deadline and (any(c.client.applied[-1:] != log[-1:] for c in self.clients)
                                               or any(f.background.last_seq < head for f in self.filtered)):
            time.sleep(0.5)
        late = time.monotonic() >= deadline
        found, problems = delivered_revisions(entries)
        wrong = problems + differences(found, expected_revisions(orders, batches, WINDOW_MS, SLIDE_MS))
        lines = [f"orders: {len(orders)} orders, {len(entries)} revisions in the log over {len(batches)} batches, "
                 f"{len(wrong)} wrong (epoch {reader.meta().epoch}, driver exits {len(self.driver.exits)})"]
        if late:
            lines.append(f"orders: gave up waiting after {timeout:.0f}s for every client to hold seq {head}")
        lines += [f"orders problem: {line}" for line in wrong[:10]]
        clients_ok = True
        for index, background in enumerate(self.clients):
            client = background.client
            stats = client.stats()
            if client.applied != log or stats.duplicates or stats.gaps:
                clients_ok = False
                lines.append(f"orders client {index}: {len(client.applied)} of {len(log)} revisions applied in log "
                             f"order: {client.applied == log}, duplicates {stats.duplicates}, gaps {stats.gaps}")
        # OK lines right after the summary, failures last: the last line is what a FAIL verdict line quotes.
        passed = []
        for index, filtered in enumerate(self.filtered):
            label = f"orders filtered client {index} ({filtered.profile.name})"
            problems = check_filtered(filtered, entries)
            if problems:
                clients_ok = False
                lines.append(f"{label}: FAIL, {len(problems)} problems: {'; '.join(problems[:3])}")
                continue
            oracle = views.update_oracle(filtered.profile, [(e.seq, e.processing_id, e.key, json.loads(e.data))
                                                            for e in entries])
            passed.append(f"{label}: OK exactly once, {len(oracle.entries)} revisions and {len(oracle.removals)} "
                          f"removals of its view (of {len(entries)} revisions), {len(oracle.state)} keys at the end")
        lines[1:1] = passed
        return OrdersCheck(not wrong and clients_ok and len(entries) > 0, lines)

    def stop(self) -> None:
        for background in [*self.clients, *(f.background for f in self.filtered)]:
            background.stop()
        if self.producer is not None:
            self.producer.stop()
        self.driver.stop()
