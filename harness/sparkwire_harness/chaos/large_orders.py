"""The large-orders feed in a chaos run: a job under Spark's real-time mode (``sparkwire.examples.large_orders``,
``deliver(mode="realtime")``) beside the micro-batch jobs, under the same faults — its driver is SIGKILLed with
theirs (in the middle of a real-time batch: the batch is long), its Spark-to-Kafka and Spark-to-Redis links
cross the same proxies, so it lives through the run's Redis failovers and Kafka leader losses, and its
clients connect through the same edges and gateways.

It reads the orders topic the orders example's producer already fills (one producer, two jobs): its oracle,
``expected_feed``, needs only the produced orders. Its clients run in a process of their own
(``chaos/clients.py``, the metrics clients' code): some steady, some leaving and coming back with their cursor
or with their session alone.

Checked at the end: the log holds exactly ``expected_feed(...)`` — every large order's record once, in
gap-free seqs — and every client rendered every entry of the log exactly once per session, in seq order
(``verifier.check_client``).
"""

from __future__ import annotations

import json
import random
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

from sparkwire.examples.large_orders.expected import expected_feed, feed_differences
from sparkwire.examples.orders.produce import load_orders
from sparkwire.gateway.auth.tokens import issue_token
from sparkwire.replaylog import ReplayLogReader
from sparkwire.replaylog.model import Entry
from sparkwire_harness.chaos.clients import write_json
from sparkwire_harness.chaos.pipeline import SupervisedAggregator
from sparkwire_harness.chaos.topology import LARGE_ORDERS, ORDERS, Topology
from sparkwire_harness.chaos.verifier import LogView, Verdict, check_client
from sparkwire_harness.stack import ManagedProcess

THRESHOLD = Decimal("500")  # amounts are uniform over 1..1000: about half the orders are large
# Spark's checkpoint interval in real-time mode: a driver kill lands inside a batch, whose rows Spark sends
# again from the batch's start, and the relay must refuse them.
REALTIME_BATCH = "30 seconds"
# Its own SIGKILL in the middle of a real-time batch, beside the run's driver kills (a short run's scheduled
# ones can all land while its driver is still starting, before any batch): once this many rows of a batch are
# in its log, and, after the first batch, between these seconds after the last batch's commit, so that the
# batch is neither starting nor about to commit. A kill at a fixed count of entries landed once just after a
# commit, and one that waited for a first commit came too late once, every order already in: Spark had
# nothing to send again, and the run showed no refused row.
ROWS_INTO_BATCH = 10
INSIDE_BATCH_S = (5.0, 20.0)
CHECKPOINT = "checkpoint-large-orders"  # in the run's folder
CLIENT_KINDS = ("steady", "cursor", "session", "cursor")
CLIENTS_PROCESS = "clients-large-orders"


@dataclass
class SupervisedLargeOrders(SupervisedAggregator):
    name = "large-orders-job"

    def command(self) -> list[str]:
        # local[3]: a real-time batch holds a task slot per source partition (2) for its whole length.
        return [sys.executable, "-m", "sparkwire.examples.large_orders", "run", "--master", "local[3]",
                "--log-level", "WARNING"]

    def environment(self) -> dict[str, str]:
        topology = self.topology
        redis_url, redis_env = topology.redis_access("spark-redis")
        return {**redis_env, **topology.spark_scratch(),
                "LARGE_ORDERS_BOOTSTRAP_SERVERS": topology.kafka.spark_bootstrap, "LARGE_ORDERS_TOPIC": ORDERS,
                "LARGE_ORDERS_STREAM": LARGE_ORDERS, "LARGE_ORDERS_REDIS_URL": redis_url,
                "LARGE_ORDERS_CHECKPOINT": str(topology.workdir / CHECKPOINT),
                "LARGE_ORDERS_THRESHOLD": str(THRESHOLD), "LARGE_ORDERS_REALTIME_BATCH": REALTIME_BATCH,
                # A replica must hold each commit (WAIT), as the aggregator's: a failover loses no tail then.
                "LARGE_ORDERS_REPLICAS": redis_env.get("SPARKWIRE_REDIS_REPLICAS", "0")}


def client_plans(seed: int, window_s: float, edges: Sequence[str]) -> list[dict[str, Any]]:
    """The feed's clients (without url, port and token): one per ``CLIENT_KINDS``, over the edges; each cursor
    and session client away once, inside the fault window's middle, so it comes back to a log that moved on.
    Seeded apart from the run's schedule, which stays what it was for a seed."""
    rng = random.Random(f"large-orders-{seed}")
    plans = []
    for index, kind in enumerate(CLIENT_KINDS):
        absences: list[list[float]] = []
        if kind != "steady":
            leave = round(rng.uniform(0.15, 0.6) * window_s, 1)
            absences.append([leave, round(leave + rng.uniform(0.05, 0.2) * window_s, 1)])
        plans.append({"id": index, "kind": kind, "edge": edges[index % len(edges)], "absences": absences,
                      "profile": "", "filter": None})
    return plans


@dataclass
class FeedCheck:
    ok: bool
    lines: list[str] = field(default_factory=list)


def check_feed(entries: Sequence[Entry], expected: Mapping[str, Mapping[str, Any]],
               clients: Sequence[Mapping[str, Any]], refused: int, driver_exits: int) -> FeedCheck:
    """The feed's log against its oracle, and each client's render against the log. The OK line first, or the
    problems with the last one the one a FAIL verdict quotes."""
    problems = []
    seqs = [entry.seq for entry in entries]
    if seqs != list(range(1, len(seqs) + 1)):
        jump = next(i for i, seq in enumerate(seqs, start=1) if seq != i)
        problems.append(f"seqs not gap-free: seq {seqs[jump - 1]} where {jump} belongs")
    problems += [f"log: {line}" for line in feed_differences([entry.data for entry in entries], expected)[:10]]
    log, verdict = LogView(entries), Verdict()
    for client in clients:
        check_client(f"client {client['id']} ({client['kind']}, {client['edge']})", client, log, verdict)
    problems += [f"{p.who}, seq {p.seq}: {p.what}" for p in verdict.problems[:10]]
    if not entries:
        problems.append("no entry in the log")
    if len(clients) != len(CLIENT_KINDS):
        problems.append(f"{len(clients)} clients reported, {len(CLIENT_KINDS)} planned")
    if problems:
        return FeedCheck(False, [f"large-orders (real-time) problem: {line}" for line in problems])
    resumed = sum(len(client["segments"]) - 1 for client in clients)
    return FeedCheck(True, [f"large-orders (real-time): OK exactly once, {len(entries)} entries, {refused} re-sent "
                            f"rows refused; {len(clients)} clients x {len(entries)} entries ({resumed} session "
                            f"resumes), driver exits {driver_exits}"])


@dataclass
class LargeOrdersSide:
    topology: Topology
    driver: SupervisedLargeOrders
    clients: ManagedProcess | None = None
    _stop: threading.Event = field(default_factory=threading.Event)

    def start_driver(self) -> None:
        """The driver, and a thread that SIGKILLs it once in the middle of a real-time batch."""
        self.driver.start()
        threading.Thread(target=self._kill_mid_batch, daemon=True, name="large-orders-mid-batch-kill").start()

    def _kill_mid_batch(self) -> None:
        reader = ReplayLogReader(self.topology.redis_client(), LARGE_ORDERS)
        commits = self.topology.workdir / CHECKPOINT / "commits"  # Spark's: one file per batch
        batch_start: tuple[int, int] | None = None  # (the last committed batch, the log's seq when first seen)
        while not self._stop.wait(0.5):
            try:
                done = [int(p.name) for p in commits.iterdir() if p.name.isdigit()] if commits.is_dir() else []
                committed = max(done, default=-1)  # -1: the first batch still running
                since_commit = time.time() - (commits / str(committed)).stat().st_mtime if done else 0.0
                seq = reader.meta().last_seq
            except Exception:  # Redis failing over, the checkpoint being written: asked again
                continue
            if committed == -1:
                batch_start = (-1, 0)  # every row in the log is one of the first batch's
            elif not INSIDE_BATCH_S[0] <= since_commit <= INSIDE_BATCH_S[1]:
                batch_start = None
                continue
            elif batch_start is None or batch_start[0] != committed:
                batch_start = (committed, seq)
            if seq >= batch_start[1] + ROWS_INTO_BATCH:
                self.driver.kill()
                when = "its first" if committed == -1 else f"{since_commit:.0f} s after batch {committed}'s commit"
                print(f"[chaos] large-orders: its driver SIGKILLed in a real-time batch ({when}; "
                      f"{seq - batch_start[1]} of its rows in the log, at seq {seq}); restarted on its checkpoint",
                      flush=True)
                return

    @property
    def _status(self) -> Path:
        return self.topology.workdir / f"{CLIENTS_PROCESS}.status.json"

    @property
    def _report(self) -> Path:
        return self.topology.workdir / f"{CLIENTS_PROCESS}.report.json"

    def start_clients(self, secret: str, ttl: int, t0: float, window_s: float, seed: int, silence_s: float,
                      edges: Sequence[str]) -> str:
        """Start the feed's client process; what its clients are and when they are away, for the run's output."""
        plans = client_plans(seed, window_s, edges)
        for plan in plans:
            plan["url"] = self.topology.edge_ws(plan["edge"], LARGE_ORDERS)
            plan["port"] = self.topology.proxy_port(plan["edge"])
            plan["token"] = issue_token(secret, [LARGE_ORDERS], ttl, subject=f"large-orders-client-{plan['id']}",
                                        now=int(time.time()))
        plan_path = self.topology.workdir / f"{CLIENTS_PROCESS}.plan.json"
        write_json(plan_path, {"t0": t0, "silence_s": silence_s, "status": str(self._status),
                               "report": str(self._report), "clients": plans})
        self.clients = ManagedProcess(CLIENTS_PROCESS, [sys.executable, "-m", "sparkwire_harness.chaos.clients",
                                                        str(plan_path)], self.topology.workdir)
        self.clients.start()
        return "the large-orders feed's clients: " + ", ".join(
            f"{plan['id']} ({plan['kind']}, {plan['edge']}" + "".join(f", away +{leave}s..+{back}s"
                                                                     for leave, back in plan["absences"]) + ")"
            for plan in plans)

    def _client_seqs(self) -> list[int]:
        try:
            return [int(seq) for seq in json.loads(self._status.read_text())["seqs"].values()]
        except (OSError, ValueError, KeyError):
            return []

    def check(self, orders_file: Path, timeout: float = 180) -> FeedCheck:
        """Wait until the log holds as many entries as the oracle and every client its head (or the time is
        up), collect what the clients rendered, then compare."""
        expected = expected_feed(load_orders(orders_file), ORDERS, THRESHOLD)
        reader = ReplayLogReader(self.topology.redis_client(), LARGE_ORDERS)
        deadline = time.monotonic() + timeout
        while reader.meta().last_seq < len(expected) and time.monotonic() < deadline:
            time.sleep(1.0)
        head = reader.meta().last_seq
        while time.monotonic() < deadline and not all(seq >= head for seq in self._client_seqs() or [-1]):
            time.sleep(0.5)
        # A wait that ran out says so (what the log and the clients held then), ahead of the check's lines: the
        # check's own verdict stands.
        late = [] if time.monotonic() < deadline else [
            f"large-orders (real-time): gave up waiting after {timeout:.0f}s: the log at seq {head} of "
            f"{len(expected)} expected, its clients at {self._client_seqs() or 'no status'}"]
        time.sleep(2.0)  # anything more (a duplicate) is in the log by now
        entries, meta = list(reader.iter_all()), reader.meta()
        if self.clients is None:
            return FeedCheck(False, ["large-orders (real-time) problem: its clients never started"])
        self.clients.stop(timeout=60)  # SIGTERM: the process stops its clients and writes its report
        try:
            reports = json.loads(self._report.read_text())["clients"]
        except (OSError, ValueError, KeyError) as error:
            return FeedCheck(False, [f"large-orders (real-time) problem: its clients wrote no report ({error})"])
        check = check_feed(entries, expected, reports, int(meta.counters.get("duplicates_suppressed", 0)),
                           len(self.driver.exits))
        return FeedCheck(check.ok, late + check.lines)

    def stop(self) -> None:
        self._stop.set()
        if self.clients is not None:
            self.clients.kill()
        self.driver.stop()
