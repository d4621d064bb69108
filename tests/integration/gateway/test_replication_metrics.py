"""A gateway started with the Sentinel URL of a replicated Redis (real processes) exports the primary's
replication on /metrics, and counts a primary change when the primary is SIGKILLed and a replica promoted."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest

from sparkwire_harness.stack import GatewayProcess, RedisServer, ReplicatedRedis

pytestmark = pytest.mark.slow

# The gateway polls every 5 s; a failover takes ~3.3 s here.
WAIT_S = 40.0


def wait_until(condition: Callable[[], bool], what: str, gateway: GatewayProcess) -> None:
    deadline = time.monotonic() + WAIT_S
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"no {what} in {WAIT_S} s:\n{gateway.metrics_text()}\n{gateway.process.log_tail(30)}")
        time.sleep(0.2)


def test_the_gateway_exports_replication_and_counts_a_failover(tmp_path: Path, unique_name: str) -> None:
    with ReplicatedRedis(tmp_path / "redis") as replicated:
        gateway = GatewayProcess(tmp_path, replicated.url, [unique_name]).start()
        try:
            wait_until(lambda: gateway.metric("sparkwire_redis_replicas_connected") == 2, "2 replicas", gateway)
            assert gateway.metric("sparkwire_redis_replication_lag_seconds") <= 2
            assert gateway.metric("sparkwire_redis_replication_lag_bytes") >= 0
            assert gateway.metric("sparkwire_redis_primary_changes_total") == 0  # the first id seen is no change

            old = replicated.kill_primary()
            replicated.wait_for_failover(old)
            wait_until(lambda: gateway.metric("sparkwire_redis_primary_changes_total") == 1, "primary change",
                       gateway)
            # The other replica now streams from the promoted one; the killed primary is gone.
            wait_until(lambda: gateway.metric("sparkwire_redis_replicas_connected") == 1, "1 replica", gateway)

            replicated.restart(old)  # back as a replica of the new primary: no change of primary
            wait_until(lambda: gateway.metric("sparkwire_redis_replicas_connected") == 2, "2 replicas again",
                       gateway)
            assert gateway.metric("sparkwire_redis_primary_changes_total") == 1
            assert gateway.process.alive
        finally:
            gateway.stop()


def test_a_lone_redis_shows_no_replica_and_a_restart_as_a_primary_change(tmp_path: Path, unique_name: str) -> None:
    """A lone Redis restarted from its AOF starts a new replication id (Redis 7.0): counted as a change."""
    with RedisServer(tmp_path / "redis") as redis_server:
        gateway = GatewayProcess(tmp_path, redis_server.url, [unique_name]).start()
        try:
            with redis_server.client() as client:  # the gateway polled (only its watch sends INFO)
                wait_until(lambda: client.info("commandstats").get("cmdstat_info", {}).get("calls", 0) >= 1,
                           "INFO replication", gateway)
            assert gateway.metric("sparkwire_redis_replicas_connected") == 0
            assert gateway.metric("sparkwire_redis_replication_lag_bytes") == 0
            assert gateway.metric("sparkwire_redis_primary_changes_total") == 0

            redis_server.restart()
            wait_until(lambda: gateway.metric("sparkwire_redis_primary_changes_total") == 1, "primary change",
                       gateway)
            assert gateway.metric("sparkwire_redis_replicas_connected") == 0
        finally:
            gateway.stop()
