"""The Job manifest the suite's producers and probes run as, and waiting for a Job."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from sparkwire_harness.kind.jobs import job_logs, kafka_client_job, wait_job
from sparkwire_harness.kind.settings import KAFKA_CLIENT_LABEL

from .conftest import FakeClock, FakeCore, fake_kube, pod


def test_a_kafka_client_job_runs_once_restricted_and_labelled() -> None:
    job = kafka_client_job("produce-1", "gw:1", ["sparkwire", "produce"])
    assert job["spec"]["backoffLimit"] == 0 and job["spec"]["template"]["spec"]["restartPolicy"] == "Never"
    labels = job["spec"]["template"]["metadata"]["labels"]
    assert KAFKA_CLIENT_LABEL.items() <= labels.items() and labels["app.kubernetes.io/part-of"] == "sparkwire-e2e"
    [container] = job["spec"]["template"]["spec"]["containers"]
    assert (container["image"], container["command"]) == ("gw:1", ["sparkwire", "produce"])
    assert container["securityContext"]["allowPrivilegeEscalation"] is False
    assert "affinity" not in job["spec"]["template"]["spec"]


def test_an_unlabelled_job_off_a_node() -> None:
    job = kafka_client_job("probe", "gw:1", ["python3"], kafka_client=False, off_node="sparkwire-worker")
    spec = job["spec"]["template"]["spec"]
    assert not KAFKA_CLIENT_LABEL.keys() & job["spec"]["template"]["metadata"]["labels"].keys()
    [term] = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert term["matchExpressions"] == [{"key": "kubernetes.io/hostname", "operator": "NotIn",
                                         "values": ["sparkwire-worker"]}]


class FakeBatch:
    def __init__(self, statuses: list[dict[str, int]]) -> None:
        self.statuses = statuses

    def read_namespaced_job_status(self, _name: str, _namespace: str) -> Any:
        return SimpleNamespace(status=SimpleNamespace(**{"succeeded": 0, "failed": 0, **self.statuses.pop(0)}))


def test_wait_job_returns_once_it_succeeded(clock: FakeClock) -> None:
    wait_job(fake_kube(batch=FakeBatch([{}, {}, {"succeeded": 1}])), "produce-1", timeout=60)
    assert clock.slept == [2, 2]


def test_a_failed_job_raises_with_its_pods_story(clock: FakeClock) -> None:
    evicted = pod("produce-1-abc", phase="Failed", ready=False, node="sparkwire-worker2")
    core = FakeCore(pods={"job-name=produce-1": [evicted]}, logs={"produce-1-abc": "KafkaError: timed out"})
    kube = fake_kube(core, batch=FakeBatch([{"failed": 1}]))
    with pytest.raises(AssertionError, match=r"Job produce-1 failed") as failed:
        wait_job(kube, "produce-1", timeout=60)
    assert "pod produce-1-abc on sparkwire-worker2: Failed" in str(failed.value)
    assert "Ready=False" in str(failed.value) and "KafkaError: timed out" in str(failed.value)
    assert job_logs(kube, "other") == ""


def test_a_job_not_done_in_time(clock: FakeClock) -> None:
    with pytest.raises(AssertionError, match=r"Job produce-1 not done after 5s"):
        wait_job(fake_kube(batch=FakeBatch([{}] * 10)), "produce-1", timeout=5)
