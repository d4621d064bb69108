"""A whole node lost under load: the worker that runs the Redis **primary**, a gateway and the Spark driver
is stopped (`docker stop -t 0` of its kind node container: its processes get no time to shut down, as when
a machine loses power) while a producer writes events and 50 clients read through the ingress.

What Kubernetes and sparkwire do then, each checked:
- the Sentinels on the two other nodes fail over to a replica within seconds (the writer and the gateways
  follow them);
- the node goes NotReady (~40 s: the kubelet stops reporting); the test then does what the Kubernetes docs
  prescribe for a node that is shut down and will not return soon, the `node.kubernetes.io/out-of-service`
  taint (non-graceful node shutdown): its pods are deleted at once, so the StatefulSet's Redis pod and the
  Spark operator's driver start on other nodes, on the same volumes (kind-up puts every volume on a
  directory all nodes mount, as a cloud cluster's network disks are; infra/kind/README.md);
- the clients of the lost gateway reconnect to the others and resume from their cursors.

Checked as everywhere: every client got every result exactly once and the log equals what the produced
records give; one epoch and no tail loss across the failover; the driver and the lost gateway were
replaced on other nodes. Afterwards the node is started again, Ready, and the taint removed.

The release runs the chart's replicated Redis for this test (redis_replicas.replicated_redis, then rolled
back); Kafka stays one broker, wherever the scheduler put it (when on the lost node it moves too).
"""

from __future__ import annotations

import time

import pytest

from sparkwire_harness.e2e.fault_loop import FaultLoop

from .conftest import (
    DRIVER_SELECTOR,
    GATEWAY_SELECTOR,
    NAMESPACE,
    REDIS_SELECTOR,
    RELEASE_SELECTOR,
    Kube,
    Release,
    check_exactly_once,
    progress,
    scenario,
)
from .nodes import (
    CONTROL_PLANE,
    OUT_OF_SERVICE,
    cordon,
    docker,
    move_driver_and_a_gateway_onto,
    node_of,
    placement,
    ready_condition,
    set_taint,
    start_node,
)
from .redis_replicas import (
    PODS,
    Replicated,
    aggregator_counters,
    agreed_primary,
    redis_cli,
    redis_logs,
    replicated_redis,
    wait_agreed_primary,
)

pytestmark = pytest.mark.slow

__all__ = ["replicated_redis"]  # the fixture, used by name


def make_primary(kube: Kube, pod: str) -> None:
    """The Sentinels fail over to ``pod``: the other replica gets replica-priority 0 (never promoted), the
    Sentinels see it at their next INFO poll (every 10 s), `SENTINEL FAILOVER`; priorities restored."""
    current = wait_agreed_primary(kube, timeout=120)
    if current == pod:
        return
    other = next(p for p in PODS if p not in (pod, current))
    assert redis_cli(other, "CONFIG", "SET", "replica-priority", "0") is not None, redis_logs(kube)
    try:
        time.sleep(12)
        assert redis_cli(pod, "SENTINEL", "FAILOVER", "sparkwire", sentinel=True) is not None, redis_logs(kube)
        deadline = time.monotonic() + 90
        while agreed_primary(kube) != pod:
            assert time.monotonic() < deadline, f"the Sentinels did not fail over to {pod}: {redis_logs(kube)}"
            time.sleep(2)
    finally:
        redis_cli(other, "CONFIG", "SET", "replica-priority", "100")
    kube.note(f"the Sentinels failed over to {pod} (was {current}): the primary on the node to lose")


def arrange_victim(kube: Kube, release: Release) -> str:
    """The worker to lose, made to run the driver, a gateway and the Redis primary."""
    driver = kube.driver()
    assert driver is not None, DRIVER_SELECTOR
    victim = driver.spec.node_name
    if victim == CONTROL_PLANE:  # the API server and the ingress live there: lose a worker
        victim = next(n for n in sorted(set(placement(kube, REDIS_SELECTOR).values())) if n != CONTROL_PLANE)
    move_driver_and_a_gateway_onto(kube, victim, release.gateway_replicas)
    on_victim = [pod for pod, node in placement(kube, REDIS_SELECTOR).items() if node == victim]
    assert on_victim, f"no Redis pod on {victim}: {placement(kube, REDIS_SELECTOR)}"
    make_primary(kube, on_victim[0])
    running = sorted(pod for pod, node in placement(kube, RELEASE_SELECTOR).items() if node == victim)
    kube.note(f"to lose: {victim}, running {running}")
    return str(victim)


class NodeLoss:
    """Ticks of a FaultLoop: at the 3rd the node's container is stopped; then the failover and NotReady
    are watched for, and the out-of-service taint is put on the NotReady node."""

    def __init__(self, kube: Kube, node: str) -> None:
        self.kube = kube
        self.node = node
        self.primary = agreed_primary(kube)
        self.tick = 0
        self.stopped_at = 0.0
        self.failover_s: float | None = None
        self.not_ready_s: float | None = None
        self.new_primary: str | None = None

    def __call__(self) -> None:
        self.tick += 1
        if self.tick == 3:
            done = docker("stop", "-t", "0", self.node)
            assert done.returncode == 0, done.stderr
            self.stopped_at = time.monotonic()
            self.kube.note(f"docker stop -t 0 {self.node}")
        elif self.stopped_at:
            self.observe()

    def observe(self) -> None:
        elapsed = time.monotonic() - self.stopped_at
        if self.failover_s is None:
            primary = agreed_primary(self.kube)
            if primary is not None and primary != self.primary:
                self.failover_s, self.new_primary = elapsed, primary
                self.kube.note(f"failover after {elapsed:.0f} s: the Sentinels name {primary}")
        if self.not_ready_s is None and ready_condition(self.kube, self.node) != "True":
            self.not_ready_s = elapsed
            self.kube.note(f"{self.node} NotReady after {elapsed:.0f} s")
            set_taint(self.kube, self.node, OUT_OF_SERVICE, True)

    def wait(self, timeout: float = 300) -> None:
        deadline = time.monotonic() + timeout
        while self.not_ready_s is None or self.failover_s is None:
            assert time.monotonic() < deadline, (
                f"after {timeout}s: failover after {self.failover_s} s, NotReady after {self.not_ready_s} s")
            self.observe()
            time.sleep(2)


@pytest.mark.timeout(2700)
def test_a_node_with_the_redis_primary_a_gateway_and_the_driver_lost_under_load(
    kube: Kube, release: Release, replicated_redis: Replicated,
) -> None:
    link = replicated_redis.link
    kube.wait_ready(GATEWAY_SELECTOR, release.gateway_replicas)
    victim = arrange_victim(kube, release)
    driver = kube.driver()
    assert driver is not None and driver.spec.node_name == victim
    lost_gateways = {p for p, n in placement(kube, GATEWAY_SELECTOR).items() if n == victim}
    loss = NodeLoss(kube, victim)

    def recovered() -> None:
        loss.wait()
        new = kube.wait_for_driver(not_uid=driver.metadata.uid, timeout=420)
        kube.note(f"new driver {new.metadata.name} on {new.spec.node_name}")
        kube.wait_ready(GATEWAY_SELECTOR, release.gateway_replicas)
        kube.wait_ready(REDIS_SELECTOR, len(PODS), timeout=300)

    try:
        clients, production = scenario(kube, link, release, FaultLoop(loss, every=5.0), after=recovered,
                                       seconds=90, results_timeout=480, producer_off_node=victim)
        check_exactly_once(clients, production, link, release, kube)
        events = kube.events
        assert loss.failover_s is not None and loss.new_primary is not None, events
        assert node_of(kube, loss.new_primary) != victim, events
        new_driver = kube.driver()
        assert new_driver is not None and new_driver.spec.node_name != victim, events
        gateways = placement(kube, GATEWAY_SELECTOR)
        assert not lost_gateways & set(gateways) and victim not in gateways.values(), (lost_gateways, gateways)
        meta = link.meta(replicated_redis.stream)
        assert str(meta.epoch) == replicated_redis.epoch, f"a new epoch: {replicated_redis.epoch} -> {meta}"
        assert meta.counters.get("tail_losses", 0) == 0, meta
        counters = aggregator_counters(("sparkwire_aggregator_tail_losses_total",))
        if isinstance(counters, dict):
            assert counters.get("sparkwire_aggregator_tail_losses_total", 0) == 0, counters
        progress(f"node {victim} lost: failover after {loss.failover_s:.0f} s, NotReady after "
                 f"{loss.not_ready_s:.0f} s; {sum(c.client.stats().reconnects for c in clients)} client reconnects")
    finally:
        start_node(kube, victim)
        for node in (victim, CONTROL_PLANE):
            cordon(kube, node, False)
        kube.wait_ready(REDIS_SELECTOR, len(PODS), timeout=300)
        progress(f"Redis pods after the node came back: {placement(kube, REDIS_SELECTOR)} ({NAMESPACE})")
