"""The release switched to the chart's replicated Redis and back, for the tests that lose its primary or a
whole node (tests/e2e/kind/test_replicated_redis.py). `podManagementPolicy` cannot change in place, so the
single Redis's StatefulSet is deleted without its pods first, as the chart README says; on the way back the
pod adopted from the replicated StatefulSet is replaced. What those tests check besides exactly once: the
log's epoch kept and no tail loss (the meta hash and the driver's counter), no gateway replaced."""

from __future__ import annotations

import contextlib
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass

from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from .kube import Kube
from .objects import container, env_value, is_live, labels, name, pod_spec, restarts, uid
from .port_forward import PortForward
from .progress import progress
from .redis_link import RedisLink
from .release import Release
from .sentinels import (
    PODS,
    PrimaryLink,
    redis_logs,
    role,
    wait_agreed_primary,
    wait_replicas_caught_up,
)
from .settings import CHART, FULLNAME, GATEWAY_SELECTOR, NAMESPACE, REDIS_POD, REDIS_SELECTOR, RELEASE
from .tools import Tools, kubectl

STATEFULSET = f"{FULLNAME}-redis"
REPLICA_CLAIMS = [f"data-{pod}" for pod in PODS[1:]]  # pod 0's claim is the single Redis's, kept
SENTINEL_URL = "redis+sentinel://"
TAIL_LOSSES = "sparkwire_job_tail_losses_total"


def delete_statefulset_keeping_pods(kube: Kube) -> None:
    """`kubectl delete statefulset <fullname>-redis --cascade=orphan`: the pods keep running (and serving)
    until the StatefulSet helm creates next adopts and replaces them."""
    try:
        kube.apps.delete_namespaced_stateful_set(STATEFULSET, NAMESPACE, propagation_policy="Orphan")
    except ApiException as error:
        if error.status != 404:
            raise
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            kube.apps.read_namespaced_stateful_set(STATEFULSET, NAMESPACE)
        except ApiException as error:
            if error.status == 404:
                kube.note(f"statefulset {STATEFULSET} deleted, its pods kept (--cascade=orphan)")
                return
            raise
        time.sleep(1)
    raise AssertionError(f"statefulset {STATEFULSET} still there 60 s after its deletion")


def replace_adopted_pods(kube: Kube, timeout: float = 120) -> None:
    """Delete (gracefully: Redis writes its AOF on SIGTERM; the claim stays) every pod of the Redis
    StatefulSet whose revision is not the StatefulSet's update revision: pods adopted from the StatefulSet
    deleted with --cascade=orphan, which the controller would not replace while they are not Ready."""
    deadline = time.monotonic() + timeout
    while True:
        statefulset = kube.apps.read_namespaced_stateful_set(STATEFULSET, NAMESPACE)
        revision = statefulset.status.update_revision if statefulset.status else None
        if revision or time.monotonic() > deadline:
            break
        time.sleep(1)
    assert revision, f"statefulset {STATEFULSET} has no update revision after {timeout}s"
    for pod in kube.pods(REDIS_SELECTOR):
        of = labels(pod).get("controller-revision-hash")
        if of not in (None, revision) and is_live(pod):
            kube.note(f"{name(pod)} is of revision {of}, the StatefulSet's is {revision}: deleted so the "
                      "StatefulSet starts it anew on its claim")
            kube.delete_pod(name(pod))
    while True:  # pod 0 of the StatefulSet's own revision, Ready (a terminating old one may still look Ready)
        pod0 = next((p for p in kube.ready_pods(REDIS_SELECTOR) if name(p) == REDIS_POD), None)
        if pod0 is not None and labels(pod0).get("controller-revision-hash") == revision:
            return
        assert time.monotonic() < deadline + 300, f"{REDIS_POD} of revision {revision} not Ready: {redis_logs(kube)}"
        time.sleep(2)


def delete_replica_claims(kube: Kube) -> None:
    """Pods 1 and 2's claims (an earlier run's, or this run's after the rollback removed the pods): a replica
    starting on an old volume would bring an old Sentinel record along."""
    for claim in REPLICA_CLAIMS:
        try:
            kube.core.delete_namespaced_persistent_volume_claim(claim, NAMESPACE)
            kube.note(f"deleted claim {claim}")
        except ApiException as error:
            if error.status != 404:
                raise
    deadline = time.monotonic() + 120
    while (left := [name(c) for c in kube.claims(REDIS_SELECTOR) if name(c) in REPLICA_CLAIMS]):
        assert time.monotonic() < deadline, f"claims not deleted within 120 s: {left}"
        time.sleep(2)


def forget_sentinel_record(pod: str) -> None:
    """Pod 0's volume outlives the switch back to one Redis; a Sentinel record left on it (`/data/sentinel`)
    would name the primary of an earlier run's replicated Redis at the next switch."""
    done = kubectl("exec", pod, "-c", "redis", "--", "rm", "-rf", "/data/sentinel")
    assert done.returncode == 0, f"rm -rf /data/sentinel in {pod}: {done.stderr}"


def driver_redis_url(pod: k8s.V1Pod) -> str:
    return env_value(container(pod_spec(pod), "spark-kubernetes-driver"), "SPARKWIRE_REDIS_URL") or ""


def wait_for_driver_on(kube: Kube, scheme: str, timeout: float = 420) -> k8s.V1Pod:
    """A running driver whose Redis URL has ``scheme`` (the operator resubmits the application after the
    upgrade changed its environment)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        driver = kube.driver()
        if driver is not None and driver_redis_url(driver).startswith(scheme):
            kube.note(f"driver {name(driver)} on {scheme}")
            return driver
        time.sleep(3)
    raise AssertionError(f"no running driver on a {scheme} URL within {timeout}s: "
                         f"{kube.spark_application().get('status', {})}")


def metric_values(text: str, names: tuple[str, ...]) -> dict[str, float]:
    """The unlabelled samples of ``names`` in a Prometheus text exposition."""
    values: dict[str, float] = {}
    for line in text.splitlines():
        name, _, value = line.partition(" ")
        if name in names:
            values[name] = float(value)
    return values


def aggregator_counters(names: tuple[str, ...]) -> dict[str, float] | str:
    """The driver's counters through its metrics Service (port-forward), or why they could not be read."""
    forward = PortForward(f"svc/{FULLNAME}-aggregator-metrics", 9108)
    try:
        port = forward.start()
        with urllib.request.build_opener(urllib.request.ProxyHandler({})).open(
                f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
            text = response.read().decode()
    except (OSError, AssertionError) as error:
        return f"unreachable: {error}"
    finally:
        forward.stop()
    return metric_values(text, names)


def gateway_pods(kube: Kube) -> dict[str, tuple[str, int]]:
    """Live gateway pod -> (uid, restarts): equal before and after means none was replaced or restarted."""
    return {name(p): (uid(p), restarts(p)) for p in kube.pods(GATEWAY_SELECTOR) if is_live(p)}


@dataclass
class Replicated:
    link: PrimaryLink
    stream: str
    epoch: str

    def assert_log_kept(self, *more_counters: str) -> dict[str, float] | str:
        """The log kept its epoch and counts no tail loss: its meta hash, and the driver's
        ``sparkwire_job_tail_losses_total`` where its metrics Service answers. The counters read (with
        ``more_counters``), or why they could not be."""
        meta = self.link.meta(self.stream)
        assert str(meta.epoch) == self.epoch, f"a new epoch: {self.epoch} -> {meta}"
        assert meta.counters.get("tail_losses", 0) == 0, meta
        counters = aggregator_counters((TAIL_LOSSES, *more_counters))
        if isinstance(counters, dict):
            assert counters.get(TAIL_LOSSES, 0) == 0, counters
        return counters


@contextlib.contextmanager
def replicated_release(tools: Tools, kube: Kube, redis_link: RedisLink, release: Release) -> Iterator[Replicated]:
    """The release upgraded to `redis.replication.enabled=true` (the single Redis's pod 0 becomes the first
    primary on its own volume, pods 1 and 2 sync from it); afterwards rolled back to its revision, which
    brings back the single Redis on pod 0's volume, and the replicas' claims deleted. The switch and the way
    back take ~2.5 min each."""
    revision = tools.revision()
    before = redis_link.meta(release.stream)
    kube.note(f"the single Redis: epoch {before.epoch}, last seq {before.last_seq}")
    delete_replica_claims(kube)
    forget_sentinel_record(REDIS_POD)
    link = PrimaryLink(kube)
    try:
        delete_statefulset_keeping_pods(kube)
        tools.helm("upgrade", RELEASE, str(CHART), "--namespace", NAMESPACE, "--reuse-values",
                   "--set", "redis.replication.enabled=true", *tools.image_values(), "--wait", "--timeout", "8m",
                   timeout=600)
        kube.wait_all_ready(REDIS_SELECTOR, timeout=300)
        kube.wait_ready(REDIS_SELECTOR, len(PODS))
        kube.wait_rolled_out()
        wait_for_driver_on(kube, SENTINEL_URL)
        primary = wait_agreed_primary(kube, timeout=120)
        roles = {pod: role(pod) for pod in PODS}
        kube.note(f"replicated Redis up: the Sentinels name {primary}; roles {roles}")
        assert sorted(str(r) for r in roles.values()) == ["master", "slave", "slave"], (roles, redis_logs(kube))
        after = link.meta(release.stream)
        assert (after.epoch, after.last_seq) == (before.epoch, before.last_seq), (
            f"the switch changed the log: {before} -> {after}")
        yield Replicated(link, release.stream, str(after.epoch))
        primary = wait_agreed_primary(kube, timeout=120)
        wait_replicas_caught_up(primary)  # pod 0, which the single Redis reopens, holds everything
        last = link.meta(release.stream)
    finally:
        link.close()
        progress(f"restoring the release (revision {revision}): the single Redis on pod 0's volume")
        delete_statefulset_keeping_pods(kube)
        # No --wait: the new StatefulSet adopts the orphaned pod 0, which still has the replicated spec (a
        # `sentinel` container whose script the single release's ConfigMap lacks, so it may never get Ready),
        # and a StatefulSet does not replace a pod that never gets Ready (Kubernetes' "forced rollback"
        # limitation): the adopted pod is replaced below, then everything is waited for.
        tools.helm("rollback", RELEASE, str(revision), "--namespace", NAMESPACE, timeout=600)
        replace_adopted_pods(kube)
        kube.wait_no_pods(f"{REDIS_SELECTOR},statefulset.kubernetes.io/pod-name notin ({REDIS_POD})", timeout=180)
        kube.wait_ready(REDIS_SELECTOR, 1)
        kube.wait_rolled_out()
        wait_for_driver_on(kube, "redis://")
        delete_replica_claims(kube)
        forget_sentinel_record(REDIS_POD)
    restored = redis_link.meta(release.stream)
    assert (restored.epoch, restored.last_seq) == (last.epoch, last.last_seq), (
        f"the single Redis after the rollback: {restored}; the replicated one had {last}")
    kube.note(f"release restored: the single Redis, epoch {restored.epoch}, last seq {restored.last_seq}")
