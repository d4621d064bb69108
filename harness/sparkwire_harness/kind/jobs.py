"""One-shot Jobs in the release's namespace, in the gateway image (which has the whole sparkwire package):
the producer of a run, the orders example's producer, the NetworkPolicy probes. Labelled as Kafka clients
(unless told not to) so that the chart's NetworkPolicies let them reach Kafka; never retried (a retried
producer would send its records twice)."""

from __future__ import annotations

import time
from typing import Any

from .kube import Kube
from .objects import name, node_name, pod_status
from .settings import KAFKA_CLIENT_LABEL, NAMESPACE

PART_OF = {"app.kubernetes.io/part-of": "sparkwire-e2e"}
RESTRICTED = {"runAsNonRoot": True, "allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]},
              "seccompProfile": {"type": "RuntimeDefault"}}


def avoiding_node(node: str) -> dict[str, Any]:
    """A pod affinity that keeps the pod off ``node``."""
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "NotIn", "values": [node]}]}]}}}


def kafka_client_job(name: str, image: str, command: list[str], kafka_client: bool = True,
                     off_node: str | None = None) -> dict[str, Any]:
    """The Job's manifest. ``off_node``: a node the pod must not run on — the node a test drains or stops:
    the producer is the test's instrument, not the system under test, and an evicted one-shot producer fails
    its Job (a CI run lost test_drain that way)."""
    return {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name, "labels": dict(PART_OF)},
        "spec": {
            "backoffLimit": 0,
            "ttlSecondsAfterFinished": 600,
            "template": {
                "metadata": {"labels": {**(KAFKA_CLIENT_LABEL if kafka_client else {}), **PART_OF}},
                "spec": {
                    "restartPolicy": "Never",
                    **({"affinity": avoiding_node(off_node)} if off_node else {}),
                    # Pod level: only PodSecurityContext fields (the API rejects container-only ones here).
                    "securityContext": {"runAsUser": 10001, "runAsGroup": 10001, "runAsNonRoot": True,
                                        "seccompProfile": {"type": "RuntimeDefault"}},
                    "containers": [{
                        "name": "produce", "image": image, "imagePullPolicy": "IfNotPresent",
                        "command": command, "securityContext": RESTRICTED,
                        # 50m: within the node's CPU budget beside a user's job (tests/chart/test_kind_budget.py).
                        "resources": {"requests": {"cpu": "50m", "memory": "128Mi"}, "limits": {"memory": "256Mi"}},
                    }],
                },
            },
        },
    }


def start_kafka_client_job(kube: Kube, image: str, job: str, command: list[str], kafka_client: bool = True,
                           off_node: str | None = None) -> None:
    manifest = kafka_client_job(job, image, command, kafka_client, off_node)
    kube.batch.create_namespaced_job(NAMESPACE, manifest)  # type: ignore[arg-type]  # a manifest, sent as it is


def wait_job(kube: Kube, job: str, timeout: float) -> None:
    """Until the Job succeeded; an AssertionError with its pods' story when it failed or ran out of time."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status = kube.batch.read_namespaced_job_status(job, NAMESPACE).status
        if status is not None and status.succeeded:
            return
        if status is not None and status.failed:
            raise AssertionError(f"Job {job} failed; logs: {job_logs(kube, job)}")
        time.sleep(2)
    raise AssertionError(f"Job {job} not done after {timeout}s")


def job_logs(kube: Kube, job: str) -> str:
    """Each of the Job's pods: where it ran, how it ended (a pod evicted or killed says so in its
    conditions, not in its log), then its log's last lines."""
    parts = []
    for pod in kube.pods(f"job-name={job}"):
        status = pod_status(pod)
        ended = [f"{c.type}={c.status} {c.reason or ''}".strip() for c in status.conditions or []
                 if c.type == "DisruptionTarget" or c.status != "True"]
        parts.append(f"pod {name(pod)} on {node_name(pod)}: {status.phase} {status.reason or ''} {'; '.join(ended)}\n"
                     + kube.core.read_namespaced_pod_log(name(pod), NAMESPACE, tail_lines=30))
    return "\n".join(parts)
