"""Chaos against the local stack: every client holds every committed entry exactly once, in order,
checked against the stream itself, whatever happens to the gateway processes."""

from __future__ import annotations

import asyncio
import random

import redis as redis_lib

from sparkwire.client import StreamClient
from sparkwire.replaylog.sessions import session_key
from sparkwire_harness.e2e.fault_loop import FaultLoop
from sparkwire_harness.stack import Committer

from .conftest import Cluster, kill_and_restart_one, run_clients

CLIENTS = 200


def assert_exactly_once(cluster: Cluster, clients: list[StreamClient]) -> None:
    log = cluster.log_entries()
    assert [seq for seq, _ in log] == list(range(1, len(log) + 1))
    for index, client in enumerate(clients):
        assert client.applied == log, f"client {index}: {len(client.applied)} applied of {len(log)}"
        stats = client.stats()
        assert (stats.duplicates, stats.gaps) == (0, 0), f"client {index}: {stats}"


def reported_in_sessions(redis: redis_lib.Redis, clients: list[StreamClient], stream: str) -> tuple[int, int]:
    duplicates = gaps = 0
    for client in clients:
        raw = redis.hmget(session_key(client.session.session_id or "", stream), ["duplicates", "gaps"])
        duplicates += int(raw[0] or 0)
        gaps += int(raw[1] or 0)
    return duplicates, gaps


def test_gateways_killed_every_few_seconds_lose_and_repeat_nothing(
    cluster: Cluster, redis: redis_lib.Redis, unique_name: str
) -> None:
    committer = Committer(redis, unique_name, per_batch=5, interval=0.05)
    rng = random.Random(7)
    faults = FaultLoop(lambda: kill_and_restart_one(cluster, rng), every=3.0)

    clients = asyncio.run(run_clients(cluster, committer, CLIENTS, seconds=20, faults=faults))

    # Each fault waits for the restarted gateway: on a busy machine a fault every ~7 s, not every 3.
    assert faults.count >= 2, cluster.events
    assert_exactly_once(cluster, clients)
    assert sum(c.stats().reconnects for c in clients) > 0, "the kills must have cut connections"
    # What clients reported in their acks (stored in their sessions) is what they saw: nothing.
    assert reported_in_sessions(redis, clients, unique_name) == (0, 0)


def test_rolling_restart_with_sigterm_loses_and_repeats_nothing(
    cluster: Cluster, redis: redis_lib.Redis, unique_name: str
) -> None:
    committer = Committer(redis, unique_name, per_batch=5, interval=0.05)
    order = iter(cluster.gateways * 2)

    def roll_next() -> None:
        gateway = next(order, None)
        if gateway is None:
            return
        gateway.process.stop(timeout=15)  # SIGTERM: drain, 1001 to its clients
        gateway.start()

    clients = asyncio.run(run_clients(cluster, committer, CLIENTS, seconds=12, faults=FaultLoop(roll_next, 2.5)))

    assert_exactly_once(cluster, clients)
    assert sum(c.stats().closes.get(1001, 0) for c in clients) > 0, "drains close with going_away"
