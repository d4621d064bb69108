"""The chart's replicated Redis on the kind cluster, for the tests that lose its primary
(test_replicated_redis.py: the primary lost, a node lost): the Sentinels and data nodes asked from inside their pods, a
Redis link that always reaches the current primary, and the fixture that switches the release to
`redis.replication.enabled` and back (the single Redis's StatefulSet deleted without its pods first, as the
chart README says: `podManagementPolicy` cannot change in place)."""

from __future__ import annotations

import re
import subprocess
import time
import urllib.request
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
import redis as redis_lib
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from .conftest import (
    CHART,
    CONTEXT,
    FULLNAME,
    GATEWAY_SELECTOR,
    NAMESPACE,
    REDIS_POD,
    REDIS_SELECTOR,
    RELEASE,
    Kube,
    PortForward,
    RedisLink,
    Release,
    Tools,
    kubectl_binary,
    progress,
)

STATEFULSET = f"{FULLNAME}-redis"
MASTER_NAME = "sparkwire"  # the chart's redis.replication.masterName
PODS = [f"{FULLNAME}-redis-{i}" for i in range(3)]  # redis.replication.replicas 2: pods 0..2
REPLICA_CLAIMS = [f"data-{pod}" for pod in PODS[1:]]  # pod 0's claim is the single Redis's, kept
SENTINEL_URL = "redis+sentinel://"


# --- kubectl exec: the Sentinels and the data nodes, asked from inside their pods -----------------------


def kubectl(*args: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    command = [kubectl_binary() or "kubectl", "--context", CONTEXT, "-n", NAMESPACE, *args]
    try:
        return subprocess.run(command, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as expired:
        return subprocess.CompletedProcess(command, 124, str(expired.stdout or ""), "timed out")


def redis_cli(pod: str, *args: str, sentinel: bool = False, timeout: float = 15) -> str | None:
    """redis-cli inside ``pod`` (its `redis` container, which has the password in REDISCLI_AUTH; or its
    `sentinel` container, port 26379, no password); the raw reply, or None when the pod does not answer."""
    container, port = ("sentinel", "26379") if sentinel else ("redis", "6379")
    done = kubectl("exec", pod, "-c", container, "--", "redis-cli", "-h", "127.0.0.1", "-p", port, "--raw",
                   *args, timeout=timeout)
    if done.returncode != 0 or done.stdout.startswith(("ERR", "LOADING", "Could not connect")):
        return None
    return done.stdout


def pod_of(address: str) -> str:
    """A node's announced address, its pod's stable DNS name (<pod>.<headless>.<ns>.svc), -> the pod."""
    return address.split(".", 1)[0]


def sentinel_views(kube: Kube) -> dict[str, str]:
    """The primary each answering Sentinel names (pod -> pod)."""
    views: dict[str, str] = {}
    for pod in sorted(p.metadata.name for p in kube.running(REDIS_SELECTOR)):
        reply = redis_cli(pod, "SENTINEL", "GET-MASTER-ADDR-BY-NAME", MASTER_NAME, sentinel=True, timeout=8)
        if reply and reply.split():
            views[pod] = pod_of(reply.split()[0])
    return views


def agreed_primary(kube: Kube) -> str | None:
    """The pod a majority (2 of 3) of the Sentinels name as the primary, or None."""
    named = Counter(sentinel_views(kube).values()).most_common(1)
    return named[0][0] if named and named[0][1] >= 2 else None


def wait_agreed_primary(kube: Kube, timeout: float, unlike: str | None = None) -> str:
    deadline = time.monotonic() + timeout
    while True:
        primary = agreed_primary(kube)
        if primary is not None and primary != unlike:
            return primary
        if time.monotonic() > deadline:
            raise AssertionError(f"no Sentinel majority naming a primary{f' other than {unlike}' if unlike else ''} "
                                 f"within {timeout}s: {sentinel_views(kube)}; {redis_logs(kube)}")
        time.sleep(2)


def role(pod: str) -> str | None:
    """ROLE of the data node in ``pod``: master, slave, or None (not answering)."""
    reply = redis_cli(pod, "ROLE", timeout=8)
    return reply.split()[0] if reply and reply.split() else None


def replication(pod: str) -> dict[str, str]:
    reply = redis_cli(pod, "INFO", "replication", timeout=8) or ""
    return dict(line.strip().split(":", 1) for line in reply.splitlines() if ":" in line)


def redis_logs(kube: Kube, lines: int = 25) -> str:
    """The last lines of every Redis pod's containers, for a failure message."""
    out = []
    for pod in sorted(p.metadata.name for p in kube.pods(REDIS_SELECTOR)):
        for container in ("redis", "sentinel"):
            done = kubectl("logs", pod, "-c", container, f"--tail={lines}", timeout=20)
            out.append(f"--- {pod}/{container}:\n{done.stdout}{done.stderr}")
    return "\n".join(out)


# --- Redis through the current primary -------------------------------------------------------------------


class PrimaryForward(PortForward):
    """A port-forward to the pod the Sentinels name as the primary, chosen again at every (re)start."""

    def __init__(self, kube: Kube) -> None:
        super().__init__(f"pod/{REDIS_POD}", 6379)
        self.kube = kube

    def start(self, timeout: float = 30) -> int:
        self.target = f"pod/{wait_agreed_primary(self.kube, timeout=120)}"
        return super().start(timeout)


class PrimaryLink(RedisLink):
    """conftest's RedisLink (retries, re-opened port-forward), always on the primary: a call that finds
    itself on a replica (a failover moved the primary) drops the forward and goes to the new one, so what
    the checks read is what the writer wrote, never a replica's possibly older copy."""

    def __init__(self, kube: Kube) -> None:
        super().__init__(kube)
        self.forward = PrimaryForward(kube)

    def call(self, action: Callable[[redis_lib.Redis], Any], timeout: float = 240) -> Any:
        def on_primary(r: redis_lib.Redis) -> Any:
            reply = r.execute_command("ROLE")
            name = reply[0].decode() if isinstance(reply[0], bytes) else str(reply[0])
            if name != "master":
                raise redis_lib.ConnectionError(f"{self.forward.target} is a {name} now")
            return action(r)

        return super().call(on_primary, timeout)


# --- the release switched to the replicated Redis, and back -----------------------------------------------


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
        labels = pod.metadata.labels or {}
        if labels.get("controller-revision-hash") not in (None, revision) and not pod.metadata.deletion_timestamp:
            kube.note(f"{pod.metadata.name} is of revision {labels['controller-revision-hash']}, the "
                      f"StatefulSet's is {revision}: deleted so the StatefulSet starts it anew on its claim")
            kube.delete_pod(pod.metadata.name)
    while True:  # pod 0 of the StatefulSet's own revision, Ready (a terminating old one may still look Ready)
        pod0 = next((p for p in kube.ready_pods(REDIS_SELECTOR) if p.metadata.name == REDIS_POD), None)
        if pod0 is not None and (pod0.metadata.labels or {}).get("controller-revision-hash") == revision \
                and not pod0.metadata.deletion_timestamp:
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
    while (left := [c.metadata.name for c in kube.claims(REDIS_SELECTOR) if c.metadata.name in REPLICA_CLAIMS]):
        assert time.monotonic() < deadline, f"claims not deleted within 120 s: {left}"
        time.sleep(2)


def forget_sentinel_record(pod: str) -> None:
    """Pod 0's volume outlives the switch back to one Redis; a Sentinel record left on it (`/data/sentinel`)
    would name the primary of an earlier run's replicated Redis at the next switch."""
    done = kubectl("exec", pod, "-c", "redis", "--", "rm", "-rf", "/data/sentinel")
    assert done.returncode == 0, f"rm -rf /data/sentinel in {pod}: {done.stderr}"


def driver_redis_url(pod: k8s.V1Pod) -> str:
    [container] = [c for c in pod.spec.containers if c.name == "spark-kubernetes-driver"]
    return next((e.value or "" for e in container.env or [] if e.name == "SPARKWIRE_REDIS_URL"), "")


def wait_for_driver_on(kube: Kube, scheme: str, timeout: float = 420) -> k8s.V1Pod:
    """A running driver whose Redis URL has ``scheme`` (the operator resubmits the application after the
    upgrade changed its environment)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        driver = kube.driver()
        if driver is not None and driver_redis_url(driver).startswith(scheme):
            kube.note(f"driver {driver.metadata.name} on {scheme}")
            return driver
        time.sleep(3)
    raise AssertionError(f"no running driver on a {scheme} URL within {timeout}s: "
                         f"{kube.spark_application().get('status', {})}")


def wait_replicas_caught_up(primary: str, timeout: float = 120) -> dict[str, str]:
    """Until every replica the primary lists is online at its master_repl_offset (nothing is being written:
    no producer runs); the primary's INFO replication."""
    deadline = time.monotonic() + timeout
    info: dict[str, str] = {}
    while time.monotonic() < deadline:
        info = replication(primary)
        offset = info.get("master_repl_offset")
        replicas = [v for k, v in info.items() if re.fullmatch(r"slave\d+", k)]
        if offset and len(replicas) == 2 and all("state=online" in r and f"offset={offset}," in r + ","
                                                    for r in replicas):
            return info
        time.sleep(2)
    raise AssertionError(f"the replicas of {primary} did not catch up within {timeout}s: {info}")


@dataclass
class Replicated:
    link: PrimaryLink
    stream: str
    epoch: str


@pytest.fixture(scope="module")
def replicated_redis(tools: Tools, kube: Kube, redis_link: RedisLink, release: Release) -> Iterator[Replicated]:
    """The release upgraded to `redis.replication.enabled=true` (the single Redis's pod 0 becomes the first
    primary on its own volume, pods 1 and 2 sync from it); afterwards rolled back to its revision, which
    brings back the single Redis on pod 0's volume, and the replicas' claims deleted. Module-scoped: the
    switch and the way back take ~2.5 min each, so every test of the module that needs the replicated
    Redis shares one switch."""
    revision = int(tools.helm_status()["version"])
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
        assert sorted(roles.values()) == ["master", "slave", "slave"], (roles, redis_logs(kube))
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
        kube.wait_no_pods(",".join([REDIS_SELECTOR, "statefulset.kubernetes.io/pod-name notin (" + REDIS_POD + ")"]),
                          timeout=180)
        kube.wait_ready(REDIS_SELECTOR, 1)
        kube.wait_rolled_out()
        wait_for_driver_on(kube, "redis://")
        delete_replica_claims(kube)
        forget_sentinel_record(REDIS_POD)
    restored = redis_link.meta(release.stream)
    assert (restored.epoch, restored.last_seq) == (last.epoch, last.last_seq), (
        f"the single Redis after the rollback: {restored}; the replicated one had {last}")
    kube.note(f"release restored: the single Redis, epoch {restored.epoch}, last seq {restored.last_seq}")


def redis_restarts(kube: Kube, pod: str) -> int:
    statuses = kube.core.read_namespaced_pod(pod, NAMESPACE).status.container_statuses or []
    return sum(s.restart_count for s in statuses if s.name == "redis")


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
    values: dict[str, float] = {}
    for line in text.splitlines():
        name, _, value = line.partition(" ")
        if name in names:
            values[name] = float(value)
    return values


def gateway_pods(kube: Kube) -> dict[str, tuple[str, int]]:
    return {p.metadata.name: (p.metadata.uid, sum(s.restart_count for s in p.status.container_statuses or []))
            for p in kube.pods(GATEWAY_SELECTOR) if p.metadata.deletion_timestamp is None}


