"""Readiness as the suite counts it (a terminating pod is not Ready, a finished one not unready), the
gateways' rollout, Secrets decoded, and waits that give up with what they saw."""

from __future__ import annotations

import pytest
from kubernetes import client as k8s

from sparkwire_harness.kind.kube import rolled_out
from sparkwire_harness.kind.settings import FULLNAME

from .conftest import FakeClock, FakeCore, fake_kube, pod

SELECTOR = "app=x"


def test_ready_running_and_unready_pods() -> None:
    pods = [pod("ready"), pod("starting", ready=False, phase="Pending"), pod("leaving", deleting=True),
            pod("hook", ready=False, phase="Succeeded")]
    kube = fake_kube(FakeCore(pods={SELECTOR: pods}))
    assert [p.metadata.name for p in kube.ready_pods(SELECTOR)] == ["ready"]
    assert [p.metadata.name for p in kube.running(SELECTOR)] == ["ready"]
    assert kube.unready_pods(SELECTOR) == {"starting": "Pending", "leaving": "Running, deleting"}


def test_wait_ready_gives_up_naming_the_selector(clock: FakeClock) -> None:
    kube = fake_kube(FakeCore(pods={SELECTOR: [pod("a"), pod("b", ready=False)]}))
    kube.wait_ready(SELECTOR, 1)
    with pytest.raises(AssertionError, match=r"fewer than 2 ready pods for app=x after 30s"):
        kube.wait_ready(SELECTOR, 2, timeout=30)
    assert 30 < clock.now <= 34


def test_wait_all_ready_lists_what_is_not(clock: FakeClock) -> None:
    kube = fake_kube(FakeCore(pods={SELECTOR: [pod("a"), pod("b", ready=False)]}))
    with pytest.raises(AssertionError, match=r"pods not Ready after 60s: \{'b': 'Running'\}"):
        kube.wait_all_ready(SELECTOR, timeout=60)


def deployment(replicas: int, updated: int, available: int, total: int, observed: int = 2) -> k8s.V1Deployment:
    return k8s.V1Deployment(
        metadata=k8s.V1ObjectMeta(generation=2),
        spec=k8s.V1DeploymentSpec(replicas=replicas, selector=k8s.V1LabelSelector(),
                                  template=k8s.V1PodTemplateSpec()),
        status=k8s.V1DeploymentStatus(observed_generation=observed, updated_replicas=updated,
                                      available_replicas=available, replicas=total))


def test_rolled_out_means_every_replica_new_available_and_no_old_one_left() -> None:
    assert rolled_out(deployment(3, 3, 3, 3))
    assert not rolled_out(deployment(3, 3, 3, 4))  # an old pod still terminating
    assert not rolled_out(deployment(3, 2, 3, 3))
    assert not rolled_out(deployment(3, 3, 2, 3))
    assert not rolled_out(deployment(3, 3, 3, 3, observed=1))  # the controller has not seen the change


def test_secret_values_are_decoded_by_the_first_key_present() -> None:
    kube = fake_kube(FakeCore(secrets={f"{FULLNAME}-redis": {"redis-password": "s3cret"}}))
    assert kube.redis_password() == "s3cret"
    with pytest.raises(AssertionError, match=r"has none of \('password',\): \['redis-password'\]"):
        kube.secret_value(f"{FULLNAME}-redis", ("password",))
