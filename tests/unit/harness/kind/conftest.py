"""Fakes for the kind library's unit tests: a clock the waits run on instantly, Kubernetes objects as the API
server returns them, and a Kube whose API objects are fakes answering from lists."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from kubernetes import client as k8s

from sparkwire_harness.kind import checks, jobs, kube, nodes, redis_link, replicated, sentinels
from sparkwire_harness.kind.kube import Kube


class FakeClock:
    """time.monotonic/sleep/strftime: sleeping moves the clock, nothing waits."""

    def __init__(self) -> None:
        self.now = 0.0
        self.slept: list[float] = []

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds

    def strftime(self, _format: str) -> str:
        return "12:00:00"


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeClock]:
    fake = FakeClock()
    for module in (checks, jobs, kube, nodes, redis_link, replicated, sentinels):
        monkeypatch.setattr(module, "time", fake)
    yield fake


def pod(name: str, *, ready: bool = True, phase: str = "Running", node: str | None = "worker",
        deleting: bool = False, labels: dict[str, str] | None = None, restarts: int = 0) -> k8s.V1Pod:
    return k8s.V1Pod(
        metadata=k8s.V1ObjectMeta(name=name, uid=f"uid-{name}", labels=labels or {},
                                  deletion_timestamp="2026-01-01T00:00:00Z" if deleting else None),
        spec=k8s.V1PodSpec(containers=[k8s.V1Container(name="main", image="img:1")], node_name=node),
        status=k8s.V1PodStatus(
            phase=phase, conditions=[k8s.V1PodCondition(type="Ready", status="True" if ready else "False")],
            container_statuses=[k8s.V1ContainerStatus(name="redis", restart_count=restarts, image="img:1",
                                                      image_id="", ready=ready)]))


@dataclass
class FakeCore:
    """CoreV1Api answering from lists: pods by the label selector's exact string, secrets by name."""

    pods: dict[str, list[k8s.V1Pod]] = field(default_factory=dict)
    secrets: dict[str, dict[str, str]] = field(default_factory=dict)
    node_objects: dict[str, k8s.V1Node] = field(default_factory=dict)
    patches: list[tuple[str, Any]] = field(default_factory=list)
    logs: dict[str, str] = field(default_factory=dict)

    def list_namespaced_pod(self, _namespace: str, label_selector: str) -> Any:
        return k8s.V1PodList(items=self.pods.get(label_selector, []))

    def read_namespaced_secret(self, name: str, _namespace: str) -> Any:
        data = {k: base64.b64encode(v.encode()).decode() for k, v in self.secrets[name].items()}
        return k8s.V1Secret(data=data)

    def list_node(self) -> Any:
        return k8s.V1NodeList(items=list(self.node_objects.values()))

    def read_node(self, name: str) -> k8s.V1Node:
        return self.node_objects[name]

    def patch_node(self, name: str, body: Any) -> None:
        self.patches.append((name, body))

    def read_namespaced_pod_log(self, name: str, _namespace: str, tail_lines: int) -> str:
        return self.logs.get(name, "")


def fake_kube(core: FakeCore | None = None, **apis: Any) -> Kube:
    return Kube(core=core or FakeCore(), apps=apis.get("apps"), batch=apis.get("batch"),  # type: ignore[arg-type]
                custom=apis.get("custom"))
