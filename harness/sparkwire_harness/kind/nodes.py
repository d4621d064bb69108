"""The kind cluster's nodes, for the tests that lose or drain one: which node runs what, arranging that one
worker runs a given pod, stopping and starting a node's container, and the node conditions and taints
Kubernetes uses for a lost node."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable

from kubernetes import client as k8s

from .kube import Kube
from .objects import is_live, name, node_name, uid
from .progress import progress
from .settings import CONTROL_PLANE, DRIVER_SELECTOR, GATEWAY_SELECTOR, NAMESPACE

# Kubernetes' taint for a node that is shut down and will not come back soon (non-graceful node shutdown,
# GA in 1.28): its pods are deleted at once and can start elsewhere, volumes detached.
OUT_OF_SERVICE = k8s.V1Taint(key="node.kubernetes.io/out-of-service", value="nodeshutdown", effect="NoExecute")


def node_of(kube: Kube, pod: str) -> str:
    return str(node_name(kube.core.read_namespaced_pod(pod, NAMESPACE)))


def placement(kube: Kube, selector: str) -> dict[str, str]:
    """Pod -> node of the live (not terminating) pods of ``selector``."""
    return {name(p): where for p in kube.pods(selector) if is_live(p) and (where := node_name(p))}


def on_node(kube: Kube, selector: str, node: str) -> list[str]:
    """The live pods of ``selector`` on ``node``, sorted."""
    return sorted(pod for pod, where in placement(kube, selector).items() if where == node)


def nodes(kube: Kube) -> list[str]:
    return sorted(name(n) for n in kube.core.list_node().items)


def workers(kube: Kube) -> list[str]:
    return [n for n in nodes(kube) if n != CONTROL_PLANE]


def cordon(kube: Kube, node: str, unschedulable: bool) -> None:
    kube.core.patch_node(node, {"spec": {"unschedulable": unschedulable}})


def move_one_onto(kube: Kube, selector: str, node: str, delete: Callable[[str], None],
                  ready: Callable[[], bool], timeout: float = 420) -> None:
    """Unless a pod of ``selector`` runs on ``node``: one such pod moved there (:func:`move_pod_onto`)."""
    where = placement(kube, selector)
    if node not in where.values():
        move_pod_onto(kube, selector, sorted(where)[0], node, delete, ready, timeout)


def move_pod_onto(kube: Kube, selector: str, pod: str, node: str, delete: Callable[[str], None],
                  ready: Callable[[], bool], timeout: float = 420) -> None:
    """Every other node cordoned, ``pod`` deleted (by ``delete``: its owner makes a new one, which can only go to
    ``node``), ``ready()`` awaited with a pod of ``selector`` on ``node``, the others uncordoned."""
    others = [n for n in nodes(kube) if n != node]
    for other in others:
        cordon(kube, other, True)
    try:
        kube.note(f"moving {selector.split(',')[-1]} onto {node}: deleting {pod}, the other nodes cordoned")
        delete(pod)
        deadline = time.monotonic() + timeout
        while not (node in placement(kube, selector).values() and ready()):
            assert time.monotonic() < deadline, f"no pod of {selector} on {node} within {timeout}s"
            time.sleep(3)
    finally:
        for other in others:
            cordon(kube, other, False)


def crowded_move(where: dict[str, str], all_nodes: list[str], keep: str | None = None) -> tuple[str, str] | None:
    """(a pod sharing its node with another of its kind, a node running none) for ``where`` (pod -> node);
    None when no node runs two, or none runs zero. ``keep`` is moved only when it is the only choice."""
    by_node: dict[str, list[str]] = {}
    for pod, where_pod in sorted(where.items()):
        by_node.setdefault(where_pod, []).append(pod)
    free = [n for n in sorted(all_nodes) if n not in by_node]
    crowded = [sorted(pods, key=lambda p: (p == keep, p)) for pods in by_node.values() if len(pods) > 1]
    if not crowded or not free:
        return None
    return crowded[0][0], free[0]


def spread_one_per_node(kube: Kube, selector: str, delete: Callable[[str], None], ready: Callable[[], bool],
                        keep: str | None = None) -> None:
    """Until no node runs two pods of ``selector`` while another runs none: one of a crowded node's pods
    (``keep`` last) moved to a free node. The chart's anti-affinity is only preferred, and a pod deleted
    while its node was cordoned (a fault, a drain) starts beside another of its kind and stays there."""
    while (move := crowded_move(placement(kube, selector), nodes(kube), keep)) is not None:
        move_pod_onto(kube, selector, *move, delete, ready)


def move_driver_and_a_gateway_onto(kube: Kube, node: str, gateway_replicas: int) -> None:
    """Unless they run there already: the Spark driver (deleted with no grace; the operator's new driver can
    only go to ``node``, and its executors follow it) and one gateway moved onto ``node``."""
    driver = kube.driver()
    assert driver is not None, DRIVER_SELECTOR
    old = uid(driver)

    def new_driver_running() -> bool:
        running = kube.driver()
        return running is not None and uid(running) != old

    move_one_onto(kube, DRIVER_SELECTOR, node, lambda name: kube.delete_pod(name, grace_seconds=0),
                  new_driver_running)
    move_one_onto(kube, GATEWAY_SELECTOR, node, kube.delete_pod,
                  lambda: len(kube.ready_pods(GATEWAY_SELECTOR)) >= gateway_replicas)


def docker(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """The docker CLI (a kind node is a container of the machine's Docker engine)."""
    return subprocess.run(["docker", *args], capture_output=True, text=True, timeout=timeout, check=False)


def ready_condition(kube: Kube, node: str) -> str:
    """The node's Ready condition: "True", "False" or "Unknown" (the node controller's word for a node whose
    kubelet stopped reporting)."""
    status = kube.core.read_node(node).status
    conditions = (status.conditions if status is not None else None) or []
    return next((str(c.status) for c in conditions if c.type == "Ready"), "Unknown")


def wait_condition(kube: Kube, node: str, wanted: set[str], timeout: float) -> float:
    """Seconds until the node's Ready condition is one of ``wanted``."""
    start = time.monotonic()
    while (status := ready_condition(kube, node)) not in wanted:
        assert time.monotonic() - start < timeout, f"node {node} still Ready={status} after {timeout}s"
        time.sleep(2)
    return time.monotonic() - start


def taints_with(current: list[k8s.V1Taint], taint: k8s.V1Taint, present: bool) -> list[dict[str, str]]:
    """A node's taints as a patch body: ``taint`` (by key) added or removed, the others kept."""
    kept = [t for t in current if t.key != taint.key]
    return [{"key": t.key, "value": t.value or "", "effect": t.effect} for t in [*kept, *([taint] if present else [])]]


def set_taint(kube: Kube, node: str, taint: k8s.V1Taint, present: bool) -> None:
    spec = kube.core.read_node(node).spec
    body = taints_with((spec.taints if spec is not None else None) or [], taint, present)
    kube.core.patch_node(node, {"spec": {"taints": body}})
    kube.note(f"taint {taint.key} {'added to' if present else 'removed from'} {node}")


def start_node(kube: Kube, node: str, timeout: float = 300) -> None:
    """The node's container started again (kind nodes survive a restart), Ready, the out-of-service taint
    removed: the cluster as the next test expects it."""
    if docker("inspect", "-f", "{{.State.Running}}", node).stdout.strip() != "true":
        started = docker("start", node)
        assert started.returncode == 0, started.stderr
        kube.note(f"docker start {node}")
    seconds = wait_condition(kube, node, {"True"}, timeout)
    set_taint(kube, node, OUT_OF_SERVICE, False)
    progress(f"node {node} Ready again after {seconds:.0f} s")
