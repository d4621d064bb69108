"""A whole node lost under load (tests/e2e/kind/test_replicated_redis.py's second test): the worker that
runs the Redis **primary**, a gateway and the Spark driver is stopped (`docker stop -t 0` of its kind node
container: its processes get no time to shut down, as when a machine loses power) while a producer writes
events and clients read through the ingress.

What Kubernetes and sparkwire do then, each watched for here and checked by the test:
- the Sentinels on the two other nodes fail over to a replica within seconds (the writer and the gateways
  follow them);
- the node goes NotReady (~40 s: the kubelet stops reporting); then what the Kubernetes docs prescribe for
  a node that is shut down and will not return soon, the `node.kubernetes.io/out-of-service` taint
  (non-graceful node shutdown): its pods are deleted at once, so the StatefulSet's Redis pod and the Spark
  operator's driver start on other nodes, on the same volumes (kind-up puts every volume on a directory all
  nodes mount, as a cloud cluster's network disks are; infra/kind/README.md);
- the clients of the lost gateway reconnect to the others and resume from their cursors.
"""

from __future__ import annotations

import time

from .kube import Kube
from .nodes import (
    OUT_OF_SERVICE,
    docker,
    move_driver_and_a_gateway_onto,
    move_one_onto,
    on_node,
    placement,
    ready_condition,
    set_taint,
    spread_one_per_node,
    workers,
)
from .objects import node_name
from .release import Release
from .sentinels import MASTER_NAME, PODS, agreed_primary, redis_cli, redis_logs, sentinel_views, wait_agreed_primary
from .settings import CONTROL_PLANE, DRIVER_SELECTOR, REDIS_SELECTOR, RELEASE_SELECTOR


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
        assert redis_cli(pod, "SENTINEL", "FAILOVER", MASTER_NAME, sentinel=True) is not None, redis_logs(kube)
        deadline = time.monotonic() + 90
        while agreed_primary(kube) != pod:
            assert time.monotonic() < deadline, f"the Sentinels did not fail over to {pod}: {redis_logs(kube)}"
            time.sleep(2)
    finally:
        # Checked: a replica left at priority 0 could never be promoted when the node is lost.
        restored = any(redis_cli(other, "CONFIG", "SET", "replica-priority", "100") is not None for _ in range(3))
        assert restored, f"{other}'s replica-priority not restored: {redis_logs(kube)}"
    kube.note(f"the Sentinels failed over to {pod} (was {current}): the primary on the node to lose")


def arrange_victim(kube: Kube, release: Release) -> str:
    """The worker to lose, made to run the driver, a gateway and the Redis primary."""
    # One Redis pod (and its Sentinel) per node first: a node holding two would take two Sentinels of three
    # with it, and the one left could never fail over (no majority). The last test's deletion of the primary
    # with its node cordoned starts it beside another Redis pod.
    spread_one_per_node(kube, REDIS_SELECTOR, kube.delete_pod,
                        lambda: len(kube.ready_pods(REDIS_SELECTOR)) >= len(PODS), keep=agreed_primary(kube))
    driver = kube.driver()
    assert driver is not None, DRIVER_SELECTOR
    # A worker (the API server and the ingress live on the control plane) that runs a Redis pod: the
    # scheduler may have put none on the driver's node, or none on any worker (the chart's anti-affinity is
    # preferred, not required), so the driver's node is only the first choice.
    with_redis = sorted({n for n in placement(kube, REDIS_SELECTOR).values() if n != CONTROL_PLANE})
    driver_node = node_name(driver)
    if driver_node is not None and driver_node in with_redis:
        victim = driver_node
    elif with_redis:
        victim = with_redis[0]
    else:
        victim = workers(kube)[0]
        move_one_onto(kube, REDIS_SELECTOR, victim, kube.delete_pod,
                      lambda: len(kube.ready_pods(REDIS_SELECTOR)) >= len(PODS))
    move_driver_and_a_gateway_onto(kube, victim, release.gateway_replicas)
    on_victim = on_node(kube, REDIS_SELECTOR, victim)
    assert on_victim, f"no Redis pod on {victim}: {placement(kube, REDIS_SELECTOR)}"
    make_primary(kube, on_victim[0])
    kube.note(f"to lose: {victim}, running {on_node(kube, RELEASE_SELECTOR, victim)}")
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
                f"after {timeout}s: failover after {self.failover_s} s, NotReady after {self.not_ready_s} s; "
                f"the Sentinels name {sentinel_views(self.kube)}; Redis pods on "
                f"{placement(self.kube, REDIS_SELECTOR)}; {redis_logs(self.kube)}")
            self.observe()
            time.sleep(2)
