"""Chaos on the kind cluster: while events flow through Kafka, the Spark aggregator and the gateways to
running clients, the gateway Deployment is rolled; the Spark driver pod, gateway pods and the Redis pod are
deleted with no grace, staggered, in one run; and the release is upgraded with helm. Afterwards every client
holds exactly the stream's entries after its snapshot, in order, with no duplicate or gap, and the stream
holds this run's window results exactly once — the same assertions as tests/e2e/local, on the real
deployment.

One run with every fault rather than a run per fault: each run costs minutes of producing and catching up
on the shared cluster, and a single fault is the first round of test_every_fault_in_one_run. A fault-free
run is test_skaffold.py's and test_helm_install.py's; graceful gateway stops (drain, 1001) are the rolling
restart's here and test_drain.py's; a graceful Redis stop (AOF written on SIGTERM, back on its volume) is
test_helm_install.py's reinstall, and a deletion with no grace under load, the harder case, is here.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterator

import pytest

from sparkwire_harness.e2e.fault_loop import FaultLoop
from sparkwire_harness.kind.kube import Kube
from sparkwire_harness.kind.redis_link import RedisLink
from sparkwire_harness.kind.release import Release
from sparkwire_harness.kind.scenario import check_exactly_once, scenario
from sparkwire_harness.kind.settings import CHART, GATEWAY_SELECTOR, NAMESPACE, REDIS_POD, REDIS_SELECTOR, RELEASE
from sparkwire_harness.kind.tools import Tools

pytestmark = pytest.mark.slow


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
    check_exactly_once(clients, production, redis_link, release, kube)
    assert sum(c.client.stats().closes.get(1001, 0) for c in clients) > 0, "drained pods close with going_away"


class StaggeredFaults:
    """One fault per tick, in the order given, round after round. A step whose target is not back from its
    last fault (no running driver yet, fewer than two ready gateways, Redis still loading) is passed over
    for that round rather than waited for, so the faults keep their spacing; ``done`` lists what was
    injected."""

    def __init__(self, kube: Kube, steps: list[tuple[str, Callable[[], bool]]]) -> None:
        self.kube = kube
        self.steps = steps
        self.done: list[str] = []
        self._tick = 0

    def __call__(self) -> None:
        name, inject = self.steps[self._tick % len(self.steps)]
        self._tick += 1
        if inject():
            self.done.append(name)
        else:
            self.kube.note(f"{name}: not back from its last fault, passed over this round")


@pytest.mark.timeout(1200)
def test_every_fault_in_one_run(kube: Kube, redis_link: RedisLink, release: Release) -> None:
    rng = random.Random(13)
    deleted_drivers: list[str] = []

    # Every deletion with no grace: the pod object is gone at once (its replacement starts right away) and
    # the kubelet gives its containers no time to stop (no preStop sleep, no drain), as when a node fails.
    def delete_driver() -> bool:
        driver = kube.driver()
        if driver is None:
            return False
        deleted_drivers.append(driver.metadata.uid)
        kube.delete_pod(driver.metadata.name, grace_seconds=0)
        return True

    def delete_gateway() -> bool:
        pods = kube.ready_pods(GATEWAY_SELECTOR)
        if len(pods) < 2:
            return False  # never every pod at once
        kube.delete_pod(rng.choice(pods).metadata.name, grace_seconds=0)
        return True

    def delete_redis() -> bool:
        if not kube.ready_pods(REDIS_SELECTOR):
            return False
        kube.delete_pod(REDIS_POD, grace_seconds=0)
        return True

    staggered = StaggeredFaults(kube, [("driver", delete_driver), ("gateway", delete_gateway),
                                       ("redis", delete_redis)])
    # 12 s apart: the first round (driver, gateway, Redis) lands while the producer runs, and a second one
    # as far as the production lasts and the targets are back.
    faults = FaultLoop(staggered, every=12.0)

    def recovered() -> None:
        last_driver = deleted_drivers[-1] if deleted_drivers else None
        kube.note(f"new driver {kube.wait_for_driver(not_uid=last_driver, timeout=240).metadata.name}")
        kube.wait_ready(REDIS_SELECTOR, 1)
        kube.wait_ready(GATEWAY_SELECTOR, release.gateway_replicas)

    # A driver restart or two and a Redis restart before every result is in: more time than one fault needs.
    clients, production = scenario(kube, redis_link, release, faults, after=recovered, results_timeout=420)

    assert {"driver", "gateway", "redis"} <= set(staggered.done), kube.events
    check_exactly_once(clients, production, redis_link, release, kube)
    state = kube.spark_application().get("status", {}).get("applicationState", {}).get("state")
    assert state == "RUNNING", state
    assert sum(c.client.stats().reconnects for c in clients) > 0, "the deletions must have cut connections"


UPGRADE_ANNOTATION = "sparkwire.io/upgraded-at"
UPGRADE_VALUE = r"gateway.podAnnotations.sparkwire\.io/upgraded-at"  # helm --set: an unescaped "." nests


@pytest.fixture
def release_restored_afterwards(tools: Tools, kube: Kube) -> Iterator[int]:
    """The release's revision before the test; afterwards, when the test changed it, `helm rollback` to it,
    so later tests see the release as installed (the gateways roll back to pods without the annotation)."""
    revision = tools.revision()
    yield revision
    if tools.revision() == revision:
        return
    tools.helm("rollback", RELEASE, str(revision), "--namespace", NAMESPACE, "--wait", "--timeout", "5m",
               timeout=420)
    kube.wait_rolled_out()
    annotated = [p.metadata.name for p in kube.ready_pods(GATEWAY_SELECTOR)
                 if UPGRADE_ANNOTATION in (p.metadata.annotations or {})]
    assert not annotated, f"gateway pods still carry {UPGRADE_ANNOTATION} after the rollback: {annotated}"


@pytest.mark.timeout(1200)
def test_helm_upgrade_under_load(kube: Kube, redis_link: RedisLink, release: Release, tools: Tools,
                                 release_restored_afterwards: int) -> None:
    # A pod annotation through the chart's gateway.podAnnotations: a change of the pod template, so helm
    # rolls every gateway, and nothing else of the release changes (the driver keeps running).
    stamp = str(int(time.time()))
    upgrade_args = [RELEASE, str(CHART), "--namespace", NAMESPACE, "--reuse-values",
                    "--set-string", f"{UPGRADE_VALUE}={stamp}",
                    *tools.image_values(), "--wait", "--timeout", "5m"]
    pods_before = {p.metadata.name for p in kube.pods(GATEWAY_SELECTOR)}
    failures: list[AssertionError] = []
    upgrades = iter(range(1))

    def upgrade() -> None:
        if next(upgrades, None) is None:
            return
        kube.note(f"helm upgrade --reuse-values: gateway pod annotation {UPGRADE_ANNOTATION}={stamp}")
        try:
            tools.helm("upgrade", *upgrade_args, timeout=420)
        except AssertionError as error:  # the fault thread would swallow it
            failures.append(error)
            return
        kube.note("helm upgrade done")

    faults = FaultLoop(upgrade, every=10.0)
    clients, production = scenario(kube, redis_link, release, faults, after=kube.wait_rolled_out)

    assert not failures, failures[0]
    assert tools.revision() == release_restored_afterwards + 1
    pods_after = kube.ready_pods(GATEWAY_SELECTOR)
    assert len(pods_after) == release.gateway_replicas
    assert all((p.metadata.annotations or {}).get(UPGRADE_ANNOTATION) == stamp for p in pods_after), (
        {p.metadata.name: p.metadata.annotations for p in pods_after})
    assert not pods_before & {p.metadata.name for p in pods_after}, "every gateway pod must have been replaced"
    check_exactly_once(clients, production, redis_link, release, kube)
    assert sum(c.client.stats().closes.get(1001, 0) for c in clients) > 0, "drained pods close with going_away"
