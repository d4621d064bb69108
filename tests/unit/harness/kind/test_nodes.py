"""Which node runs what, the taints patched onto a lost node, its Ready condition."""

from __future__ import annotations

from kubernetes import client as k8s

from sparkwire_harness.kind.nodes import (
    OUT_OF_SERVICE,
    crowded_move,
    on_node,
    placement,
    ready_condition,
    taints_with,
    workers,
)
from sparkwire_harness.kind.settings import CONTROL_PLANE

from .conftest import FakeCore, fake_kube, pod


def test_placement_leaves_out_terminating_and_unscheduled_pods() -> None:
    pods = [pod("a", node="w1"), pod("b", node="w2"), pod("c", node="w1", deleting=True), pod("d", node=None)]
    kube = fake_kube(FakeCore(pods={"s": pods}))
    assert placement(kube, "s") == {"a": "w1", "b": "w2"}
    assert on_node(kube, "s", "w1") == ["a"]


def node(name: str, ready: str | None = "True", taints: list[k8s.V1Taint] | None = None) -> k8s.V1Node:
    conditions = [k8s.V1NodeCondition(type="Ready", status=ready)] if ready else []
    return k8s.V1Node(metadata=k8s.V1ObjectMeta(name=name), spec=k8s.V1NodeSpec(taints=taints),
                      status=k8s.V1NodeStatus(conditions=conditions))


def test_workers_are_every_node_but_the_control_plane() -> None:
    core = FakeCore(node_objects={n: node(n) for n in ("sparkwire-worker2", CONTROL_PLANE, "sparkwire-worker")})
    assert workers(fake_kube(core)) == ["sparkwire-worker", "sparkwire-worker2"]


def test_a_node_that_reports_no_condition_is_unknown() -> None:
    core = FakeCore(node_objects={"w1": node("w1", ready="False"), "w2": node("w2", ready=None)})
    assert ready_condition(fake_kube(core), "w1") == "False"
    assert ready_condition(fake_kube(core), "w2") == "Unknown"


def test_the_out_of_service_taint_is_added_once_and_removed_leaving_the_others() -> None:
    other = k8s.V1Taint(key="example.com/dedicated", value="db", effect="NoSchedule")
    added = taints_with([other], OUT_OF_SERVICE, present=True)
    assert added == [{"key": "example.com/dedicated", "value": "db", "effect": "NoSchedule"},
                     {"key": "node.kubernetes.io/out-of-service", "value": "nodeshutdown", "effect": "NoExecute"}]
    assert taints_with([other, OUT_OF_SERVICE], OUT_OF_SERVICE, present=True) == added
    assert taints_with([other, OUT_OF_SERVICE], OUT_OF_SERVICE, present=False) == added[:1]


def test_a_crowded_node_gives_up_a_pod_to_a_free_node_keeping_the_primary_last() -> None:
    nodes = ["cp", "w1", "w2"]
    # The primary r-1 was deleted with w1 cordoned and started beside r-2 on w2.
    assert crowded_move({"r-0": "cp", "r-1": "w2", "r-2": "w2"}, nodes, keep="r-1") == ("r-2", "w1")
    assert crowded_move({"r-0": "cp", "r-1": "w2", "r-2": "w2"}, nodes, keep="r-2") == ("r-1", "w1")
    assert crowded_move({"r-0": "cp", "r-1": "w1", "r-2": "w2"}, nodes) is None  # one per node already
    assert crowded_move({"r-0": "w1", "r-1": "w1", "r-2": "w2", "r-3": "w2"}, ["w1", "w2"]) is None  # no free node
    assert crowded_move({"r-0": "w1", "r-1": "w1", "r-2": "w1"}, nodes) == ("r-0", "cp")
