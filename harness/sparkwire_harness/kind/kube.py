"""The Kubernetes API on the release's namespace: pods by selector and their readiness, the Spark driver and
its SparkApplication, the gateways' Deployment and its rollout, claims and Secrets; every wait bounded and
failing with what it saw. ``Kube.note`` keeps a timeline of what the test did (in failure messages)."""

from __future__ import annotations

import base64
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from kubernetes import client as k8s
from kubernetes import config as k8s_config

from .objects import is_live, is_ready, name, phase, pod_spec, uid
from .progress import progress
from .settings import (
    AGGREGATOR_APP,
    CONTEXT,
    DRIVER_SELECTOR,
    EXECUTOR_SELECTOR,
    FULLNAME,
    GATEWAY_DEPLOYMENT,
    NAMESPACE,
)


@dataclass
class Kube:
    core: k8s.CoreV1Api
    apps: k8s.AppsV1Api
    batch: k8s.BatchV1Api
    custom: k8s.CustomObjectsApi
    events: list[str] = field(default_factory=list)

    @classmethod
    def connect(cls, context: str = CONTEXT) -> Kube:
        api = k8s_config.new_client_from_config(context=context)  # type: ignore[no-untyped-call]
        return cls(k8s.CoreV1Api(api), k8s.AppsV1Api(api), k8s.BatchV1Api(api), k8s.CustomObjectsApi(api))

    def note(self, what: str) -> None:
        self.events.append(f"{time.strftime('%H:%M:%S')} {what}")
        progress(what)

    def pods(self, selector: str) -> list[k8s.V1Pod]:
        items: list[k8s.V1Pod] = self.core.list_namespaced_pod(NAMESPACE, label_selector=selector).items
        return items

    def ready_pods(self, selector: str) -> list[k8s.V1Pod]:
        return [p for p in self.pods(selector) if is_live(p) and is_ready(p)]

    def delete_pod(self, name: str, grace_seconds: int | None = None) -> None:
        self.core.delete_namespaced_pod(name, NAMESPACE, grace_period_seconds=grace_seconds)
        self.note(f"deleted pod {name} (grace {grace_seconds if grace_seconds is not None else 'default'})")

    def running(self, selector: str) -> list[k8s.V1Pod]:
        return [p for p in self.pods(selector) if phase(p) == "Running" and is_live(p)]

    def driver(self) -> k8s.V1Pod | None:
        running = self.running(DRIVER_SELECTOR)
        return running[0] if running else None

    def wait_for_driver(self, *, not_uid: str | None, timeout: float, image: str | None = None) -> k8s.V1Pod:
        """A running driver pod other than ``not_uid`` (the operator resubmits after a driver is lost), and
        running ``image`` when given (the operator replaces the driver after the application changed)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            pod = self.driver()
            if pod is not None and uid(pod) != not_uid and (
                    image is None or image in {c.image for c in pod_spec(pod).containers}):
                return pod
            time.sleep(2)
        app = self.spark_application()
        raise AssertionError(f"no new driver{f' on {image}' if image else ''} within {timeout}s; "
                             f"application state {app.get('status', {})}")

    def wait_for_spark_pods(self, timeout: float) -> tuple[k8s.V1Pod, list[k8s.V1Pod]]:
        """The driver and its executors running, as the operator started them."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            driver, executors = self.driver(), self.running(EXECUTOR_SELECTOR)
            if driver is not None and executors:
                return driver, executors
            time.sleep(3)
        pods = {name(p): phase(p) for p in self.pods(f"sparkoperator.k8s.io/app-name={AGGREGATOR_APP}")}
        raise AssertionError(f"no running driver and executor within {timeout}s: pods {pods}, "
                             f"application status {self.spark_application().get('status', {})}")

    def spark_application(self, application: str = AGGREGATOR_APP) -> dict[str, Any]:
        app = self.custom.get_namespaced_custom_object(
            "sparkoperator.k8s.io", "v1beta2", NAMESPACE, "sparkapplications", application)
        assert isinstance(app, dict), app
        return app

    def gateway_deployment(self) -> k8s.V1Deployment:
        return self.apps.read_namespaced_deployment(GATEWAY_DEPLOYMENT, NAMESPACE)

    def roll_gateways(self) -> None:
        """What `kubectl rollout restart` does: a new pod-template annotation."""
        stamp = datetime.now(UTC).isoformat()
        body = {"spec": {"template": {"metadata": {"annotations": {"sparkwire.io/restartedAt": stamp}}}}}
        self.apps.patch_namespaced_deployment(GATEWAY_DEPLOYMENT, NAMESPACE, body)
        self.note(f"rolling the gateways ({stamp})")

    def rolled_out(self) -> bool:
        return rolled_out(self.gateway_deployment())

    def wait_rolled_out(self, timeout: float = 300) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.rolled_out():
                self.note("gateways rolled out")
                return
            time.sleep(2)
        raise AssertionError(f"gateway rollout not finished within {timeout}s")

    def wait_ready(self, selector: str, count: int, timeout: float = 300) -> None:
        deadline = time.monotonic() + timeout
        while len(self.ready_pods(selector)) < count:
            if time.monotonic() > deadline:
                raise AssertionError(f"fewer than {count} ready pods for {selector} after {timeout}s")
            time.sleep(2)

    def unready_pods(self, selector: str) -> dict[str, str]:
        """Pods of ``selector`` that are neither Ready nor finished (a hook Job's pod is done, not unready)."""
        return {name(p): f"{phase(p)}, deleting" if not is_live(p) else phase(p) for p in self.pods(selector)
                if phase(p) != "Succeeded" and (not is_live(p) or not is_ready(p))}

    def wait_all_ready(self, selector: str, timeout: float) -> list[k8s.V1Pod]:
        deadline = time.monotonic() + timeout
        while (unready := self.unready_pods(selector)) and time.monotonic() < deadline:
            time.sleep(3)
        assert not unready, f"pods not Ready after {timeout}s: {unready}"
        return self.ready_pods(selector)

    def wait_no_pods(self, selector: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while (left := [name(p) for p in self.pods(selector)]) and time.monotonic() < deadline:
            time.sleep(3)
        assert not left, f"pods of {selector} still there after {timeout}s: {left}"

    def claims(self, selector: str) -> list[k8s.V1PersistentVolumeClaim]:
        items: list[k8s.V1PersistentVolumeClaim] = self.core.list_namespaced_persistent_volume_claim(
            NAMESPACE, label_selector=selector).items
        return items

    def delete_leftovers(self, selector: str, timeout: float) -> None:
        """Deletes what an uninstall leaves behind — the claims (the StatefulSets' and those the chart keeps)
        and the Secrets the chart keeps — and waits until the claims are gone (each is held until no pod
        mounts it)."""
        for secret in self.core.list_namespaced_secret(NAMESPACE, label_selector=selector).items:
            self.core.delete_namespaced_secret(name(secret), NAMESPACE)
            self.note(f"deleted secret {name(secret)}")
        for claim in self.claims(selector):
            self.core.delete_namespaced_persistent_volume_claim(name(claim), NAMESPACE)
            self.note(f"deleted claim {name(claim)}")
        deadline = time.monotonic() + timeout
        while (left := [name(c) for c in self.claims(selector)]) and time.monotonic() < deadline:
            time.sleep(2)
        assert not left, f"claims not deleted within {timeout}s: {left}"

    def secret_value(self, name: str, keys: tuple[str, ...]) -> str:
        """The first of ``keys`` the Secret holds, decoded."""
        data = self.core.read_namespaced_secret(name, NAMESPACE).data or {}
        for key in keys:
            if key in data:
                return base64.b64decode(data[key]).decode()
        raise AssertionError(f"secret {name} has none of {keys}: {sorted(data)}")

    def redis_password(self) -> str:
        return self.secret_value(f"{FULLNAME}-redis", ("password", "redis-password"))


def rolled_out(deployment: k8s.V1Deployment) -> bool:
    """Every replica of the Deployment's current generation updated, available, and no other left."""
    status, spec = deployment.status or k8s.V1DeploymentStatus(), deployment.spec
    wanted = spec.replicas if spec is not None else None
    generation = deployment.metadata.generation if deployment.metadata is not None else None
    return bool((status.observed_generation or 0) >= (generation or 0) and status.updated_replicas == wanted
                and status.available_replicas == wanted and (status.replicas or 0) == wanted)
