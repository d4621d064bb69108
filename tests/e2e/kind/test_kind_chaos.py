"""Chaos on the kind cluster: while events flow through Kafka, the Spark aggregator and the gateways to
running clients, gateway pods are deleted, the gateway Deployment is rolled, the Spark driver pod and the
Redis pod are deleted. Afterwards every client holds exactly the stream's entries after its snapshot, in
order, with no duplicate or gap, and the stream holds this run's window results exactly once — the same
assertions as tests/e2e/local, on the real deployment."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable

import pytest

from ..local.conftest import FaultLoop
from .conftest import (
    CLIENTS,
    DRIVER_SELECTOR,
    FULLNAME,
    GATEWAY_SELECTOR,
    RELEASE,
    Kube,
    Production,
    RedisLink,
    Release,
    Tracked,
    assert_clients_exactly_once,
    assert_log_exactly_once,
    new_production,
    run_clients,
    start_producer,
    wait_for_results,
    wait_producer,
)

pytestmark = pytest.mark.slow

PRODUCE_SECONDS = 60
RESULTS_TIMEOUT = 300  # a lost driver: the operator's retry interval, a new driver pod, Spark's start


def scenario(kube: Kube, redis_link: RedisLink, release: Release, faults: FaultLoop | None,
             after: Callable[[], None] = lambda: None) -> tuple[list[Tracked], Production]:
    """Clients connect; a producer runs for PRODUCE_SECONDS with ``faults``; ``after()`` (e.g. wait for a
    new driver); then every expected result is committed and every client has caught up."""
    kube.wait_ready(GATEWAY_SELECTOR, release.gateway_replicas)
    assert kube.driver() is not None, f"no running driver ({DRIVER_SELECTOR})"
    production = new_production(release, PRODUCE_SECONDS, redis_link.log(release.stream))

    def during() -> None:
        start_producer(kube, release, production)
        if faults is None:
            wait_producer(kube, production, timeout=PRODUCE_SECONDS + 120)
        else:
            with faults:
                wait_producer(kube, production, timeout=PRODUCE_SECONDS + 120)
        after()
        wait_for_results(redis_link, release, production, timeout=RESULTS_TIMEOUT)

    def head() -> int:
        log = redis_link.log(release.stream)
        return log[-1].seq if log else 0

    clients = asyncio.run(run_clients(CLIENTS, release.ws_url, during, head))
    return clients, production


def check(clients: list[Tracked], production: Production, redis_link: RedisLink, release: Release,
          kube: Kube) -> None:
    log = redis_link.log(release.stream)
    assert_log_exactly_once(log, production, release)
    assert_clients_exactly_once(clients, log, kube.events)


def test_baseline_without_faults(kube: Kube, redis_link: RedisLink, release: Release) -> None:
    clients, production = scenario(kube, redis_link, release, faults=None)
    check(clients, production, redis_link, release, kube)


def test_gateway_pods_deleted_under_load(kube: Kube, redis_link: RedisLink, release: Release) -> None:
    rng = random.Random(11)

    def delete_one() -> None:
        pods = kube.ready_pods(GATEWAY_SELECTOR)
        if len(pods) < 2:
            return  # let the Deployment catch up: never every pod at once
        victim = rng.choice(pods).metadata.name
        # Alternately abrupt (like SIGKILL: no close frames) and graceful (preStop, drain, 1001).
        kube.delete_pod(victim, grace_seconds=0 if rng.random() < 0.5 else None)

    faults = FaultLoop(delete_one, every=8.0)
    clients, production = scenario(kube, redis_link, release, faults)

    assert faults.count >= 5, kube.events
    check(clients, production, redis_link, release, kube)
    assert sum(c.client.stats().reconnects for c in clients) > 0, "the deletions must have cut connections"


def test_rolling_restart_of_the_gateways(kube: Kube, redis_link: RedisLink, release: Release) -> None:
    rolls = iter(range(2))

    def roll() -> None:
        if next(rolls, None) is None:
            return
        kube.roll_gateways()
        kube.wait_rolled_out()

    faults = FaultLoop(roll, every=5.0)
    clients, production = scenario(kube, redis_link, release, faults)

    assert faults.count >= 1, kube.events
    check(clients, production, redis_link, release, kube)
    assert sum(c.client.stats().closes.get(1001, 0) for c in clients) > 0, "drained pods close with going_away"


def test_spark_driver_pod_deleted(kube: Kube, redis_link: RedisLink, release: Release) -> None:
    driver = kube.driver()
    assert driver is not None
    old_uid = driver.metadata.uid
    done = iter(range(1))

    def delete_driver() -> None:
        if next(done, None) is None:
            return
        # No grace: the driver dies mid-batch, as on a node failure; the operator must resubmit it.
        kube.delete_pod(driver.metadata.name, grace_seconds=0)

    faults = FaultLoop(delete_driver, every=20.0)
    clients, production = scenario(
        kube, redis_link, release, faults,
        after=lambda: kube.note(f"new driver {kube.wait_for_driver(not_uid=old_uid, timeout=240).metadata.name}"))

    assert faults.count >= 1, kube.events
    check(clients, production, redis_link, release, kube)
    state = kube.spark_application().get("status", {}).get("applicationState", {}).get("state")
    assert state == "RUNNING", state


def test_redis_pod_deleted(kube: Kube, redis_link: RedisLink, release: Release) -> None:
    done = iter(range(1))

    def delete_redis() -> None:
        if next(done, None) is None:
            return
        # Graceful: Redis writes its AOF on SIGTERM and the StatefulSet brings it back on the same volume.
        kube.delete_pod(f"{FULLNAME}-redis-0")

    faults = FaultLoop(delete_redis, every=20.0)
    clients, production = scenario(
        kube, redis_link, release, faults,
        after=lambda: kube.wait_ready(f"app.kubernetes.io/instance={RELEASE},app.kubernetes.io/component=redis", 1))

    assert faults.count >= 1, kube.events
    check(clients, production, redis_link, release, kube)

