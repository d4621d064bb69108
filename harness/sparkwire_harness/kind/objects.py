"""Reading the Kubernetes client's objects. Its models type every field Optional (a model built by hand may
lack any), though the API server fills the metadata, spec and status of what it returns: these read them as
the server gives them, and fail naming what was missing otherwise."""

from __future__ import annotations

from typing import Protocol

from kubernetes import client as k8s


class HasMetadata(Protocol):
    metadata: k8s.V1ObjectMeta | None


def metadata(obj: HasMetadata) -> k8s.V1ObjectMeta:
    assert obj.metadata is not None, f"a {type(obj).__name__} without metadata"
    return obj.metadata


def name(obj: HasMetadata) -> str:
    value = metadata(obj).name
    assert value is not None, f"a {type(obj).__name__} without a name"
    return value


def uid(obj: HasMetadata) -> str:
    return str(metadata(obj).uid)


def labels(obj: HasMetadata) -> dict[str, str]:
    return dict(metadata(obj).labels or {})


def annotations_of(obj: HasMetadata) -> dict[str, str]:
    return dict(metadata(obj).annotations or {})


def is_live(obj: HasMetadata) -> bool:
    """Not being deleted (a terminating pod may still look Ready)."""
    return metadata(obj).deletion_timestamp is None


def pod_spec(pod: k8s.V1Pod) -> k8s.V1PodSpec:
    assert pod.spec is not None, f"pod {name(pod)} without a spec"
    return pod.spec


def pod_status(pod: k8s.V1Pod) -> k8s.V1PodStatus:
    return pod.status or k8s.V1PodStatus()


def node_name(pod: k8s.V1Pod) -> str | None:
    """The node it was scheduled to, or None while it waits for one."""
    return pod_spec(pod).node_name


def phase(pod: k8s.V1Pod) -> str:
    return str(pod_status(pod).phase)


def is_ready(pod: k8s.V1Pod) -> bool:
    return any(c.type == "Ready" and c.status == "True" for c in pod_status(pod).conditions or [])


def restarts(pod: k8s.V1Pod, container: str | None = None) -> int:
    """Restarts of the pod's containers (of the one named ``container``)."""
    return sum(s.restart_count for s in pod_status(pod).container_statuses or []
               if container is None or s.name == container)


def container(pod_template: k8s.V1PodSpec, container_name: str) -> k8s.V1Container:
    [found] = [c for c in pod_template.containers if c.name == container_name]
    return found


def env_value(c: k8s.V1Container, variable: str) -> str | None:
    """A container's plain value of ``variable`` (None when unset or from a reference)."""
    return next((e.value for e in c.env or [] if e.name == variable), None)
