"""sparkwire on the kind cluster of `make kind-up`: the real pipeline — a producer Job writing events into the
chart's Kafka, the aggregator SparkApplication committing windows into the chart's Redis, the gateway
Deployment behind the Traefik ingress — while pods are deleted, rolled and upgraded under running clients,
and the release is deployed by skaffold and installed from scratch.

Availability: a Docker engine, the kubeconfig context of the cluster, the release deployed in it and the
ingress answering; the helm and skaffold tests also need `.cache/kind/release.env`, which `make kind-up`
writes. They run only when asked (`make e2e-kind`, or SPARKWIRE_KIND=1), not in `make test`. Asked with
SPARKWIRE_KIND=1 and without a cluster, every test is skipped with the reason; with SPARKWIRE_KIND_REQUIRED=1
(set by `make e2e-kind`) the same reason fails the test: a run that was meant to exercise the cluster must
not pass by skipping all of it.

Order (``pytest_collection_modifyitems`` below): test_kind_chaos.py first (on the release as `make kind-up`
installed it), then test_network_policy.py (probe pods, the release untouched), then test_own_query.py
(adds a job to the release with helm, rolls it back after), then test_replicated_redis.py (switches the
release to the replicated Redis with helm once for its two tests and rolls it back after; the second stops
a worker's container and starts it again), then test_drain.py (drains a worker, uncordons it
after), then test_skaffold.py (skaffold redeploys the release), then test_helm_install.py, which uninstalls
the release and deletes its volumes, so it goes last and leaves a release installed from release.env's
images.

Environment: SPARKWIRE_KIND_CONTEXT (kind-sparkwire), SPARKWIRE_NAMESPACE (sparkwire), SPARKWIRE_RELEASE
(sparkwire), SPARKWIRE_KIND_HTTP (http://127.0.0.1:18080: the ingress), SPARKWIRE_KIND_CLIENTS (50),
SPARKWIRE_KIND (1: run against the cluster when there is one), SPARKWIRE_KIND_REQUIRED (1: run, and
fail without a cluster), SPARKWIRE_CACHE (.cache: where kind/release.env is).
"""

from __future__ import annotations

import asyncio
import base64
import functools
import json
import os
import queue
import random
import re
import shlex
import shutil
import subprocess
import threading
import time
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, NoReturn

import pytest
import redis as redis_lib
from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes.client.exceptions import ApiException

from sparkwire.client import StreamClient
from sparkwire.gateway.auth import issue_token
from sparkwire.producer.events import GeneratorConfig, generate
from sparkwire.producer.publisher import DELIVERY_TIMEOUT_S
from sparkwire.replaylog import ReplayLogReader
from sparkwire.replaylog.model import Entry, StreamMeta
from sparkwire_harness.e2e.clients import run_until_caught_up
from sparkwire_harness.e2e.fault_loop import FaultLoop
from sparkwire_harness.e2e.journal import ConnectionJournal, record, unexplained_resets
from sparkwire_harness.verify import WindowResult, check_seqs, compare, expected_results

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
CHART = ROOT / "charts" / "sparkwire"
KIND_VALUES = CHART / "ci" / "kind-values.yaml"
E2E_VALUES = HERE / "e2e-values.yaml"
RELEASE_ENV = Path(os.environ.get("SPARKWIRE_CACHE", str(ROOT / ".cache"))) / "kind" / "release.env"

CONTEXT = os.environ.get("SPARKWIRE_KIND_CONTEXT", "kind-sparkwire")
NAMESPACE = os.environ.get("SPARKWIRE_NAMESPACE", "sparkwire")
RELEASE = os.environ.get("SPARKWIRE_RELEASE", "sparkwire")
FULLNAME = RELEASE if "sparkwire" in RELEASE else f"{RELEASE}-sparkwire"  # the chart's sparkwire.fullname
HTTP = os.environ.get("SPARKWIRE_KIND_HTTP", "http://127.0.0.1:18080").rstrip("/")
CLIENTS = int(os.environ.get("SPARKWIRE_KIND_CLIENTS", "50"))
REQUIRED = os.environ.get("SPARKWIRE_KIND_REQUIRED", "") == "1"
# Opt-in: a cluster left running (a developer's, this machine's after `make kind-up`) must not turn
# `make test` into a 40-minute run that uninstalls and reinstalls the release.
WANTED = REQUIRED or os.environ.get("SPARKWIRE_KIND", "") == "1"
KAFKA_CLIENT_LABEL = {"sparkwire.io/kafka-client": "true"}  # the chart's networkPolicy.kafkaClientLabel
RELEASE_SELECTOR = f"app.kubernetes.io/instance={RELEASE}"  # every pod of the chart, Spark's included
DRIVER_SELECTOR = f"spark-role=driver,sparkoperator.k8s.io/app-name={FULLNAME}-aggregator"
EXECUTOR_SELECTOR = f"spark-role=executor,sparkoperator.k8s.io/app-name={FULLNAME}-aggregator"
GATEWAY_SELECTOR = f"{RELEASE_SELECTOR},app.kubernetes.io/component=gateway"
REDIS_SELECTOR = f"{RELEASE_SELECTOR},app.kubernetes.io/component=redis"
REDIS_POD = f"{FULLNAME}-redis-0"
REDIS_CLAIM = f"data-{REDIS_POD}"  # the StatefulSet's volumeClaimTemplate `data`
RELEASE_ENV_KEYS = ("SPARKWIRE_GATEWAY_IMAGE_REPOSITORY", "SPARKWIRE_GATEWAY_IMAGE_TAG",
                    "SPARKWIRE_AGGREGATOR_IMAGE_REPOSITORY", "SPARKWIRE_AGGREGATOR_IMAGE_TAG", "SPARKWIRE_HELM",
                    "SPARKWIRE_KUBECTL", "SPARKWIRE_SKAFFOLD", "SPARKWIRE_KIND_BIN", "SPARKWIRE_HELM_IMAGE_ARGS")

PRODUCE_SECONDS = 60
RESULTS_TIMEOUT = 300  # a lost driver: the operator's retry interval, a new driver pod, Spark's start
# After its last record a producer Job may flush for as long as librdkafka retries a record (a broker being
# rescheduled), then its pod stops and the Job reports.
PRODUCER_GRACE_S = DELIVERY_TIMEOUT_S + 60


# --- progress lines ---------------------------------------------------------------------------------------

_pytest_config: pytest.Config | None = None
_progress_lock = threading.Lock()


def pytest_configure(config: pytest.Config) -> None:
    global _pytest_config
    _pytest_config = config


def progress(message: str) -> None:
    """A progress line shown while the test runs, also when pytest captures output (then it is in the
    failure report as well): these tests take minutes, and a silent terminal looks like a hang."""
    line = f"[kind {time.strftime('%H:%M:%S')}] {message}"
    capture = _pytest_config.pluginmanager.getplugin("capturemanager") if _pytest_config is not None else None
    with _progress_lock:
        if capture is not None and capture.is_capturing():
            with capture.global_and_fixture_disabled():
                print(line, flush=True)
        print(line, flush=True)


# --- test order -------------------------------------------------------------------------------------------

_MODULE_ORDER = {name: rank for rank, name in enumerate([
    "test_kind_chaos.py", "test_network_policy.py", "test_own_query.py", "test_replicated_redis.py",
    "test_drain.py", "test_skaffold.py", "test_sse_ingress.py", "test_helm_install.py"])}
# test_helm_install.py reinstalls the release (a new token secret, new claims): nothing may run after it, so
# a module not named above runs just before it.
_LAST = _MODULE_ORDER["test_helm_install.py"]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The modules of this folder in the order the module docstring explains, each module's tests in file
    order; tests elsewhere keep their places (this hook sees the whole session's items)."""
    slots = [i for i, item in enumerate(items) if item.path.parent == HERE]
    ordered = sorted((items[i] for i in slots), key=lambda item: _MODULE_ORDER.get(item.path.name, _LAST - 0.5))
    for slot, item in zip(slots, ordered, strict=True):
        items[slot] = item


# --- is there a cluster to test? -------------------------------------------------------------------------


def cannot_run(reason: str) -> NoReturn:
    """Skip with the reason, or fail with it when SPARKWIRE_KIND_REQUIRED=1."""
    if REQUIRED:
        pytest.fail(f"{reason} [SPARKWIRE_KIND_REQUIRED=1: the kind tests fail instead of skipping]",
                    pytrace=False)
    pytest.skip(reason)


def read_release_env(path: Path = RELEASE_ENV) -> dict[str, str] | None:
    """The shell `KEY=value` lines `make kind-up` writes (quotes as the shell reads them), or None."""
    if not path.is_file():
        return None
    values: dict[str, str] = {}
    for number, raw in enumerate(path.read_text().splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        key, sep, value = line.removeprefix("export ").partition("=")
        if not sep or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key):
            raise AssertionError(f"{path}:{number}: not a KEY=value line: {raw!r}")
        values[key] = " ".join(shlex.split(value))
    return values


def kubectl_binary() -> str | None:
    """kind-up's kubectl (the cluster's version) when release.env names it, else the one on PATH."""
    configured = (read_release_env() or {}).get("SPARKWIRE_KUBECTL")
    if configured and os.access(configured, os.X_OK):
        return configured
    return shutil.which("kubectl")


@functools.cache
def unavailable() -> str | None:
    """Why the kind tests cannot run here, or None."""
    docker = shutil.which("docker")
    if docker is None:
        return "no docker CLI: the kind e2e tests need a Docker engine and the cluster of `make kind-up`"
    try:
        info = subprocess.run([docker, "info", "--format", "{{.ServerVersion}}"], capture_output=True, text=True,
                              timeout=30)
    except subprocess.TimeoutExpired:
        return "no Docker engine: `docker info` timed out (`make kind-up` starts one)"
    if info.returncode != 0:
        detail = (info.stderr.strip().splitlines() or ["?"])[-1]
        return f"no Docker engine (`docker info`: {detail}): `make kind-up` starts one and creates the cluster"
    try:
        contexts, _active = k8s_config.list_kube_config_contexts()
    except (k8s_config.ConfigException, OSError) as error:
        return f"no kubeconfig ({error}): run `make kind-up`"
    if CONTEXT not in {c["name"] for c in contexts}:
        return f"no kind cluster: the kubeconfig has no context {CONTEXT!r}; run `make kind-up`"
    try:
        apps = k8s.AppsV1Api(k8s_config.new_client_from_config(context=CONTEXT))
        apps.read_namespaced_deployment(f"{FULLNAME}-gateway", NAMESPACE, _request_timeout=10)
    except ApiException as error:
        return (f"sparkwire is not deployed in {CONTEXT}/{NAMESPACE} ({error.status} {error.reason}): "
                "run `make kind-up`")
    except Exception as error:  # unreachable API server: urllib3 errors of many kinds
        return f"the API server of {CONTEXT} does not answer ({type(error).__name__}: {error}): run `make kind-up`"
    if kubectl_binary() is None:
        return "no kubectl (neither release.env's SPARKWIRE_KUBECTL nor on PATH): the tests port-forward to Redis"
    try:
        http_get("/healthz")  # any answer will do: the gateway's /healthz is not routed, the controller's 404 is
    except OSError as error:
        return f"no ingress at {HTTP} ({error}): `make kind-up` installs Traefik and enables the gateway Ingress"
    return None


_direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # the ingress is local: no proxy


def http_get(path: str, host: str | None = None) -> tuple[int, str]:
    """GET through the ingress; ``host`` is the Host header it routes by, when the Ingress names hosts."""
    request = urllib.request.Request(f"{HTTP}{path}", headers={"Host": host} if host else {})
    try:
        with _direct.open(request, timeout=10) as response:
            return int(response.status), response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode(errors="replace")


@pytest.fixture(autouse=True, scope="session")
def _kind_cluster_required() -> None:
    if not WANTED:
        pytest.skip("the kind tests run with `make e2e-kind` (or SPARKWIRE_KIND=1 against a cluster of "
                    "`make kind-up`): ~17 min, and they reinstall the release")
    reason = unavailable()
    if reason is not None:
        cannot_run(reason)


# --- the tools and images of `make kind-up` ---------------------------------------------------------------


@dataclass(frozen=True)
class Tools:
    """helm, skaffold, kind and kubectl, and the images, as `make kind-up` recorded them in release.env."""

    values: dict[str, str]

    def _binary(self, key: str) -> str:
        path = self.values[key]
        if not os.access(path, os.X_OK):
            cannot_run(f"{key}={path} in {RELEASE_ENV} is not an executable: run `make kind-up`")
        return path

    @property
    def helm_binary(self) -> str:
        return self._binary("SPARKWIRE_HELM")

    @property
    def skaffold_binary(self) -> str:
        return self._binary("SPARKWIRE_SKAFFOLD")

    def env(self) -> dict[str, str]:
        """This process's environment with all of release.env over it (skaffold's build reads some of it),
        and the tools' folders first on PATH: skaffold calls helm, kind and kubectl by name."""
        folders = [self.values["SPARKWIRE_KIND_BIN"], str(Path(self.values["SPARKWIRE_HELM"]).parent),
                   str(Path(self.values["SPARKWIRE_KUBECTL"]).parent)]
        env = {**os.environ, **self.values}
        env["PATH"] = os.pathsep.join([*dict.fromkeys(folders), env.get("PATH", "")])
        return env

    def image_values(self) -> list[str]:
        """Every image value kind-up installed the release with (its own images; on the offline cluster
        also the Redis and Kafka stand-ins), as helm arguments."""
        return shlex.split(self.values["SPARKWIRE_HELM_IMAGE_ARGS"])

    def install_args(self) -> list[str]:
        """`helm install` of the release as `make kind-up` does it: the kind values, the e2e values and the
        images it built."""
        return [RELEASE, str(CHART), "--namespace", NAMESPACE, "--values", str(KIND_VALUES),
                "--values", str(E2E_VALUES), *self.image_values()]

    def helm(self, *args: str, timeout: float) -> str:
        """Runs helm on the cluster's context; its output, or an AssertionError carrying it."""
        command = [self.helm_binary, "--kube-context", CONTEXT, *args]
        shown = " ".join(args[:3])
        progress(f"helm {shown} ...")
        started = time.monotonic()
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=self.env(),
                                  cwd=ROOT)
        except subprocess.TimeoutExpired as expired:
            raise AssertionError(f"`{shlex.join(command)}` did not finish within {timeout}s; output:\n"
                                 f"{_text(expired.stdout)}{_text(expired.stderr)}") from None
        if done.returncode != 0:
            raise AssertionError(f"`{shlex.join(command)}` exited {done.returncode}:\n{done.stdout}{done.stderr}")
        progress(f"helm {shown}: done in {time.monotonic() - started:.0f}s")
        return done.stdout

    def helm_status(self) -> dict[str, Any]:
        status: dict[str, Any] = json.loads(self.helm("status", RELEASE, "--namespace", NAMESPACE, "--output",
                                                      "json", timeout=60))
        return status


def _text(output: str | bytes | None) -> str:
    return output.decode(errors="replace") if isinstance(output, bytes) else (output or "")


@pytest.fixture(scope="session")
def tools() -> Tools:
    values = read_release_env()
    if values is None:
        cannot_run(f"no {RELEASE_ENV}: `make kind-up` writes it (the tools and images of the cluster)")
    missing = [key for key in RELEASE_ENV_KEYS if not values.get(key)]
    if missing:
        cannot_run(f"{RELEASE_ENV} lacks {missing}: run `make kind-up` again")
    return Tools(values)


# --- the cluster ------------------------------------------------------------------------------------------


@dataclass
class Kube:
    core: k8s.CoreV1Api
    apps: k8s.AppsV1Api
    batch: k8s.BatchV1Api
    custom: k8s.CustomObjectsApi
    events: list[str] = field(default_factory=list)

    def note(self, what: str) -> None:
        self.events.append(f"{time.strftime('%H:%M:%S')} {what}")
        progress(what)

    def pods(self, selector: str) -> list[k8s.V1Pod]:
        items: list[k8s.V1Pod] = self.core.list_namespaced_pod(NAMESPACE, label_selector=selector).items
        return items

    def ready_pods(self, selector: str) -> list[k8s.V1Pod]:
        return [p for p in self.pods(selector) if p.metadata.deletion_timestamp is None and _ready(p)]

    def delete_pod(self, name: str, grace_seconds: int | None = None) -> None:
        self.core.delete_namespaced_pod(name, NAMESPACE, grace_period_seconds=grace_seconds)
        self.note(f"deleted pod {name} (grace {grace_seconds if grace_seconds is not None else 'default'})")

    def running(self, selector: str) -> list[k8s.V1Pod]:
        return [p for p in self.pods(selector)
                if p.status.phase == "Running" and p.metadata.deletion_timestamp is None]

    def driver(self) -> k8s.V1Pod | None:
        running = self.running(DRIVER_SELECTOR)
        return running[0] if running else None

    def wait_for_driver(self, *, not_uid: str | None, timeout: float, image: str | None = None) -> k8s.V1Pod:
        """A running driver pod other than ``not_uid`` (the operator resubmits after a driver is lost), and
        running ``image`` when given (the operator replaces the driver after the application changed)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            pod = self.driver()
            if pod is not None and pod.metadata.uid != not_uid and (
                    image is None or image in {c.image for c in pod.spec.containers}):
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
        spark_pods = self.pods(f"sparkoperator.k8s.io/app-name={FULLNAME}-aggregator")
        pods = {p.metadata.name: p.status.phase for p in spark_pods}
        raise AssertionError(f"no running driver and executor within {timeout}s: pods {pods}, "
                             f"application status {self.spark_application().get('status', {})}")

    def spark_application(self) -> dict[str, Any]:
        app: dict[str, Any] = self.custom.get_namespaced_custom_object(
            "sparkoperator.k8s.io", "v1beta2", NAMESPACE, "sparkapplications", f"{FULLNAME}-aggregator")
        return app

    def gateway_deployment(self) -> k8s.V1Deployment:
        return self.apps.read_namespaced_deployment(f"{FULLNAME}-gateway", NAMESPACE)

    def roll_gateways(self) -> None:
        """What `kubectl rollout restart` does: a new pod-template annotation."""
        stamp = datetime.now(UTC).isoformat()
        body = {"spec": {"template": {"metadata": {"annotations": {"sparkwire.io/restartedAt": stamp}}}}}
        self.apps.patch_namespaced_deployment(f"{FULLNAME}-gateway", NAMESPACE, body)
        self.note(f"rolling the gateways ({stamp})")

    def rolled_out(self) -> bool:
        d = self.gateway_deployment()
        s = d.status
        return bool((s.observed_generation or 0) >= d.metadata.generation and s.updated_replicas == d.spec.replicas
                    and s.available_replicas == d.spec.replicas and (s.replicas or 0) == d.spec.replicas)

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
        return {p.metadata.name: f"{p.status.phase}, deleting" if p.metadata.deletion_timestamp else p.status.phase
                for p in self.pods(selector)
                if p.status.phase != "Succeeded" and (p.metadata.deletion_timestamp is not None or not _ready(p))}

    def wait_all_ready(self, selector: str, timeout: float) -> list[k8s.V1Pod]:
        deadline = time.monotonic() + timeout
        while (unready := self.unready_pods(selector)) and time.monotonic() < deadline:
            time.sleep(3)
        assert not unready, f"pods not Ready after {timeout}s: {unready}"
        return self.ready_pods(selector)

    def wait_no_pods(self, selector: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while (left := [p.metadata.name for p in self.pods(selector)]) and time.monotonic() < deadline:
            time.sleep(3)
        assert not left, f"pods still there {timeout}s after the uninstall: {left}"

    def claims(self, selector: str) -> list[k8s.V1PersistentVolumeClaim]:
        items: list[k8s.V1PersistentVolumeClaim] = self.core.list_namespaced_persistent_volume_claim(
            NAMESPACE, label_selector=selector).items
        return items

    def delete_leftovers(self, selector: str, timeout: float) -> None:
        """Deletes what an uninstall leaves behind — the claims (the StatefulSets' and those the chart keeps)
        and the Secrets the chart keeps — and waits until the claims are gone (each is held until no pod
        mounts it)."""
        for secret in self.core.list_namespaced_secret(NAMESPACE, label_selector=selector).items:
            self.core.delete_namespaced_secret(secret.metadata.name, NAMESPACE)
            self.note(f"deleted secret {secret.metadata.name}")
        for claim in self.claims(selector):
            self.core.delete_namespaced_persistent_volume_claim(claim.metadata.name, NAMESPACE)
            self.note(f"deleted claim {claim.metadata.name}")
        deadline = time.monotonic() + timeout
        while (left := [c.metadata.name for c in self.claims(selector)]) and time.monotonic() < deadline:
            time.sleep(2)
        assert not left, f"claims not deleted within {timeout}s: {left}"

    def secret_value(self, name: str, keys: tuple[str, ...]) -> str:
        data = self.core.read_namespaced_secret(name, NAMESPACE).data or {}
        for key in keys:
            if key in data:
                return base64.b64decode(data[key]).decode()
        raise AssertionError(f"secret {name} has none of {keys}: {sorted(data)}")

    def redis_password(self) -> str:
        return self.secret_value(f"{FULLNAME}-redis", ("password", "redis-password"))


def _ready(pod: k8s.V1Pod) -> bool:
    return any(c.type == "Ready" and c.status == "True" for c in (pod.status.conditions or []))


@pytest.fixture(scope="session")
def kube() -> Kube:
    api = k8s_config.new_client_from_config(context=CONTEXT)
    return Kube(k8s.CoreV1Api(api), k8s.AppsV1Api(api), k8s.BatchV1Api(api), k8s.CustomObjectsApi(api))


@dataclass(frozen=True)
class Release:
    """What the deployed release is configured with, read from the cluster (not assumed)."""

    stream: str
    bootstrap_servers: str
    topic: str
    window_ms: int
    delay_ms: int
    gateway_image: str
    gateway_replicas: int
    token: str | None  # None when the release runs with gateway.auth.enabled=false

    @property
    def ws_url(self) -> str:
        return f"{HTTP.replace('http', 'ws', 1)}/ws?stream={self.stream}"


def read_release(kube: Kube) -> Release:
    app = kube.spark_application()
    [driver] = [c for c in app["spec"]["driver"]["template"]["spec"]["containers"]
                if c["name"] == "spark-kubernetes-driver"]
    env = {e["name"]: e.get("value") for e in driver.get("env", [])}
    gateway = kube.gateway_deployment()
    return Release(
        stream=env["SPARKWIRE_STREAM"], bootstrap_servers=env["SPARKWIRE_BOOTSTRAP_SERVERS"],
        topic=env["SPARKWIRE_TOPIC"], window_ms=int(env["SPARKWIRE_WINDOW_MS"]),
        delay_ms=int(env["SPARKWIRE_WATERMARK_DELAY_MS"]),
        gateway_image=gateway.spec.template.spec.containers[0].image, gateway_replicas=gateway.spec.replicas,
        token=client_token(kube, gateway, env["SPARKWIRE_STREAM"]),
    )


def client_token(kube: Kube, gateway: k8s.V1Deployment, stream: str) -> str | None:
    """A token for ``stream`` signed with the secret the gateways read (the chart generates it on a fresh
    install), long enough for the whole run; None when the gateways run without authentication."""
    [container] = [c for c in gateway.spec.template.spec.containers if c.name == "gateway"]
    refs = [ref for e in container.env or [] if e.name == "SPARKWIRE_AUTH_SECRET" and e.value_from is not None
            and (ref := e.value_from.secret_key_ref) is not None]
    if not refs:
        return None
    secret = kube.secret_value(str(refs[0].name), (refs[0].key,))
    return issue_token(secret, [stream], 6 * 3600, subject="kind-e2e", now=int(time.time()))


@pytest.fixture(scope="session")
def release(kube: Kube) -> Release:
    return read_release(kube)


# --- Redis through a port-forward ------------------------------------------------------------------------


class PortForward:
    """`kubectl port-forward` to one pod's port on a free local port; restartable (the pod may be replaced)."""

    def __init__(self, target: str, remote_port: int) -> None:
        self.target = target
        self.remote_port = remote_port
        self.local_port = 0
        self._process: subprocess.Popen[str] | None = None

    @property
    def alive(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def start(self, timeout: float = 30) -> int:
        self.stop()
        command = [kubectl_binary() or "kubectl", "--context", CONTEXT, "-n", NAMESPACE, "port-forward",
                   "--address", "127.0.0.1", self.target, f":{self.remote_port}"]
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self._process = process
        lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=lambda: [lines.put(line) for line in process.stdout or []], daemon=True).start()
        deadline = time.monotonic() + timeout
        seen = []
        while time.monotonic() < deadline:
            try:
                line = lines.get(timeout=0.5)
            except queue.Empty:
                if process.poll() is not None:
                    break
                continue
            seen.append(line.strip())
            match = re.search(r"Forwarding from 127\.0\.0\.1:(\d+) ->", line)
            if match:
                self.local_port = int(match.group(1))
                return self.local_port
        self.stop()
        raise AssertionError(f"port-forward to {self.target} did not start: {seen}")

    def stop(self) -> None:
        if self._process is not None and self._process.poll() is None:
            self._process.terminate()
            try:
                self._process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._process.kill()
        self._process = None


class RedisLink:
    """The release's Redis, reached through a port-forward that is re-opened after the pod is replaced."""

    def __init__(self, kube: Kube) -> None:
        self.password = kube.redis_password()
        self.forward = PortForward(f"pod/{REDIS_POD}", 6379)

    def call(self, action: Callable[[redis_lib.Redis], Any], timeout: float = 120) -> Any:
        deadline = time.monotonic() + timeout
        while True:
            try:
                if not self.forward.alive:
                    self.forward.start()
                client = redis_lib.Redis(port=self.forward.local_port, password=self.password, socket_timeout=10)
                try:
                    return action(client)
                finally:
                    client.close()
            except (redis_lib.ConnectionError, redis_lib.TimeoutError, AssertionError):
                self.forward.stop()
                if time.monotonic() > deadline:
                    raise
                time.sleep(2)

    def log(self, stream: str) -> list[Entry]:
        entries: list[Entry] = self.call(lambda r: list(ReplayLogReader(r, stream).iter_all()))
        return entries

    def meta(self, stream: str) -> StreamMeta:
        meta: StreamMeta = self.call(lambda r: ReplayLogReader(r, stream).meta())
        return meta

    def close(self) -> None:
        self.forward.stop()


@pytest.fixture(scope="session")
def redis_link(kube: Kube) -> Iterator[RedisLink]:
    link = RedisLink(kube)
    try:
        yield link
    finally:
        link.close()


# --- the producer Job -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Production:
    """Events produced by one Job: deterministic (seed, start, count), so the expected results are computed
    here from the same generator, independently of Spark."""

    name: str
    seed: int
    start_ms: int
    count: int
    rate: float = 200.0
    metrics: int = 40
    max_disorder_ms: int = 1000
    duplicate_ratio: float = 0.02
    malformed_ratio: float = 0.01

    def config(self) -> GeneratorConfig:
        return GeneratorConfig(seed=self.seed, metrics=self.metrics, rate=self.rate, start_ms=self.start_ms,
                               max_disorder_ms=self.max_disorder_ms, duplicate_ratio=self.duplicate_ratio,
                               malformed_ratio=self.malformed_ratio)

    def expected(self, window_ms: int, delay_ms: int) -> dict[str, WindowResult]:
        return expected_results((r.value for r in generate(self.config(), self.count)), window_ms, delay_ms)

    def args(self, release: Release) -> list[str]:
        return ["sparkwire", "produce", "--bootstrap-servers", release.bootstrap_servers, "--topic", release.topic,
                "--count", str(self.count), "--rate", str(self.rate), "--metrics", str(self.metrics),
                "--seed", str(self.seed), "--start-ms", str(self.start_ms),
                "--max-disorder-ms", str(self.max_disorder_ms), "--duplicate-ratio", str(self.duplicate_ratio),
                "--malformed-ratio", str(self.malformed_ratio), "--realtime", "--log-level", "WARNING"]


def new_production(release: Release, seconds: float, log: list[Entry], rate: float = 200.0) -> Production:
    """A run whose windows hold only its own events. Event times start after every earlier run's: an earlier
    run's last event is at most ``delay + window`` after the last window end it got committed (its later
    windows are still open), so this run starts three windows past that (and ahead of the wall clock). Its
    windows are those from ``start_ms - window`` on (``max_disorder_ms`` < window moves events back a little);
    the earlier runs' open windows, closed by this run's watermark, come before and are not compared."""
    window = release.window_ms
    last_end = max((json.loads(e.data).get("windowEnd", 0) for e in log), default=0)
    earliest = max(int(time.time() * 1000) + window, last_end + release.delay_ms + 3 * window)
    start_ms = (earliest // window + 1) * window
    return Production(name=f"produce-{start_ms}", seed=random.randrange(1, 2**31), start_ms=start_ms,
                      count=int(seconds * rate), rate=rate)


def start_kafka_client_job(kube: Kube, release: Release, name: str, command: list[str],
                           kafka_client: bool = True, off_node: str | None = None) -> None:
    """``command`` as a Job in the gateway image (which has the whole sparkwire package), labelled (unless
    ``kafka_client`` is false) so that the NetworkPolicies let it reach Kafka; run once (a retried producer
    would send its records twice). ``off_node``: a node the pod must not run on — the node a test drains
    or stops: the producer is the test's instrument, not the system under test, and an evicted one-shot
    producer fails its Job (a CI run lost test_drain that way)."""
    restricted = {"runAsNonRoot": True, "allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]},
                  "seccompProfile": {"type": "RuntimeDefault"}}
    job = {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name, "labels": {"app.kubernetes.io/part-of": "sparkwire-e2e"}},
        "spec": {
            "backoffLimit": 0,
            "ttlSecondsAfterFinished": 600,
            "template": {
                "metadata": {"labels": {**(KAFKA_CLIENT_LABEL if kafka_client else {}),
                                        "app.kubernetes.io/part-of": "sparkwire-e2e"}},
                "spec": {
                    "restartPolicy": "Never",
                    **({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [{"matchExpressions": [{
                            "key": "kubernetes.io/hostname", "operator": "NotIn", "values": [off_node]}]}]}}}}
                       if off_node else {}),
                    # Pod level: only PodSecurityContext fields (the API rejects container-only ones here).
                    "securityContext": {"runAsUser": 10001, "runAsGroup": 10001, "runAsNonRoot": True,
                                        "seccompProfile": {"type": "RuntimeDefault"}},
                    "containers": [{
                        "name": "produce", "image": release.gateway_image, "imagePullPolicy": "IfNotPresent",
                        "command": command, "securityContext": restricted,
                        # 50m: within the node's CPU budget beside a user's job (tests/chart/test_kind_budget.py).
                        "resources": {"requests": {"cpu": "50m", "memory": "128Mi"}, "limits": {"memory": "256Mi"}},
                    }],
                },
            },
        },
    }
    kube.batch.create_namespaced_job(NAMESPACE, job)


def start_producer(kube: Kube, release: Release, production: Production, off_node: str | None = None) -> None:
    start_kafka_client_job(kube, release, production.name, production.args(release), off_node=off_node)
    kube.note(f"producer {production.name}: {production.count} events from {production.start_ms}")


def wait_producer(kube: Kube, production: Production, timeout: float) -> None:
    wait_job(kube, production.name, timeout)


def wait_job(kube: Kube, name: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status = kube.batch.read_namespaced_job_status(name, NAMESPACE).status
        if status.succeeded:
            return
        if status.failed:
            raise AssertionError(f"Job {name} failed; logs: {job_logs(kube, name)}")
        time.sleep(2)
    raise AssertionError(f"Job {name} not done after {timeout}s")


def job_logs(kube: Kube, name: str) -> str:
    """Each of the Job's pods: where it ran, how it ended (a pod evicted or killed says so in its
    conditions, not in its log), then its log's last lines."""
    parts = []
    for pod in kube.pods(f"job-name={name}"):
        ended = [f"{c.type}={c.status} {c.reason or ''}".strip() for c in pod.status.conditions or []
                 if c.type == "DisruptionTarget" or c.status != "True"]
        parts.append(f"pod {pod.metadata.name} on {pod.spec.node_name}: {pod.status.phase} {pod.status.reason or ''} "
                     f"{'; '.join(ended)}\n"
                     + kube.core.read_namespaced_pod_log(pod.metadata.name, NAMESPACE, tail_lines=30))
    return "\n".join(parts)


# --- clients ----------------------------------------------------------------------------------------------


@dataclass
class Tracked:
    """A StreamClient and the journal of its connections (``harness/sparkwire_harness/e2e/journal.py``)."""

    client: StreamClient
    journal: ConnectionJournal

    @property
    def snapshots(self) -> list[int]:
        """The seq of every snapshot it applied (a fresh client starts from one)."""
        return self.journal.snapshots


def tracked_client(url: str, token: str | None) -> Tracked:
    client = StreamClient(url, token=token, keep_applied=True)
    return Tracked(client, record(client))


async def run_clients(count: int, url: str, token: str | None, during: Callable[[], None], head: Callable[[], int],
                      catch_up_timeout: float = 120) -> list[Tracked]:
    """``count`` clients connected first (each has applied its snapshot); then ``during()`` (blocking: traffic
    and faults) runs in a thread; then wait until every client has applied up to ``head()`` (the log's last seq,
    read after)."""
    clients = [tracked_client(url, token) for _ in range(count)]
    journals = {id(tracked.client): tracked.journal for tracked in clients}
    await run_until_caught_up([t.client for t in clients], ready=lambda c: bool(journals[id(c)].snapshots),
                              during=during, head=head, ready_timeout=60, catch_up_timeout=catch_up_timeout)
    return clients


# --- exactly once -----------------------------------------------------------------------------------------


def assert_clients_exactly_once(clients: list[Tracked], log: list[Entry], events: list[str]) -> None:
    """As tests/e2e/local asserts it, from where each client started: after its one snapshot, every entry of
    the stream in order — no duplicate, no gap, no second snapshot (a resume that failed)."""
    pairs = [(e.seq, e.processing_id) for e in log]
    for index, tracked in enumerate(clients):
        stats = tracked.client.stats()
        tracked.journal.settle()
        connections = "; ".join(f"[{i}] {r.describe()}" for i, r in enumerate(tracked.journal.records))
        if stats.resets.get("no_position", 0) > 1:  # the evidence, also when the test passes
            progress(f"client {index}: {stats.resets['no_position']} no_position resets: {connections}")
        # A fresh client's every no_position is its own until one snapshot is whole: each earlier one must
        # be a connection that ended before its snapshot's last part, and none may come after it.
        problems = unexplained_resets(tracked.journal.records)
        assert len(tracked.snapshots) == 1 and set(stats.resets) == {"no_position"} and not problems, (
            f"client {index}: snapshots at {tracked.snapshots}, resets {stats.resets}, {problems}; "
            f"connections: {connections}; {events}")
        start = tracked.snapshots[0]
        expected = [p for p in pairs if p[0] > start]
        assert expected, f"client {index}: no entry was committed after it connected (seq {start})"
        assert tracked.client.applied == expected, (
            f"client {index}: applied {len(tracked.client.applied)} of {len(expected)} after seq {start}; "
            f"first difference at {_first_difference(tracked.client.applied, expected)}; {events}")
        assert (stats.duplicates, stats.gaps) == (0, 0), f"client {index}: {stats}"


def _first_difference(a: list[tuple[int, str]], b: list[tuple[int, str]]) -> object:
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return {"index": i, "applied": x, "log": y}
    return {"index": min(len(a), len(b)), "applied_len": len(a), "log_len": len(b)}


def assert_log_exactly_once(log: list[Entry], production: Production, release: Release) -> None:
    """The replay log: seqs without a hole or repeat, no processingId twice, and this run's windows exactly
    the results computed independently from the produced records."""
    assert log, "the replay log is empty"
    seq_problems = check_seqs([e.seq for e in log], first=log[0].seq)
    assert not seq_problems, f"replay-log seqs: {seq_problems}"
    repeated = [pid for pid, n in Counter(e.processing_id for e in log).items() if n > 1]
    assert not repeated, f"processingIds committed twice: {repeated[:5]}"
    expected = production.expected(release.window_ms, release.delay_ms)
    mine = [e for e in log if json.loads(e.data).get("windowStart", 0) >= production.start_ms - release.window_ms]
    report = compare(expected, mine, first_seq=mine[0].seq if mine else 1)
    problems = {name: getattr(report, name) for name in ("missing", "unexpected", "duplicated", "value_mismatches")}
    assert not any(problems.values()), f"{report.summary()}"


def wait_for_results(redis_link: RedisLink, release: Release, production: Production, timeout: float) -> None:
    """Until every expected result of ``production`` is in the log (the aggregator may be restarting)."""
    wanted = set(production.expected(release.window_ms, release.delay_ms))
    assert wanted, "the production closes no window: make it longer"
    deadline = time.monotonic() + timeout
    missing = wanted
    while time.monotonic() < deadline:
        present = {e.processing_id for e in redis_link.log(release.stream)}
        missing = wanted - present
        if not missing:
            return
        time.sleep(3)
    raise AssertionError(f"{len(missing)} of {len(wanted)} expected results not committed after {timeout}s")


# --- one run: clients, a production, faults; then the exactly-once checks ---------------------------------


def scenario(kube: Kube, redis_link: RedisLink, release: Release, faults: FaultLoop | None,
             after: Callable[[], None] = lambda: None, *, seconds: float = PRODUCE_SECONDS,
             clients: int = CLIENTS, results_timeout: float = RESULTS_TIMEOUT,
             producer_off_node: str | None = None) -> tuple[list[Tracked], Production]:
    """``clients`` connect; a producer runs for ``seconds`` with ``faults`` (never on ``producer_off_node``,
    the node the faults take away); ``after()`` (e.g. wait for a new driver); then every expected result
    is committed and every client has caught up."""
    kube.wait_ready(GATEWAY_SELECTOR, release.gateway_replicas)
    assert kube.driver() is not None, f"no running driver ({DRIVER_SELECTOR})"
    production = new_production(release, seconds, redis_link.log(release.stream))

    def during() -> None:
        progress(f"{clients} clients connected; producing {production.count} events over {seconds:.0f}s")
        start_producer(kube, release, production, off_node=producer_off_node)
        if faults is None:
            wait_producer(kube, production, timeout=seconds + PRODUCER_GRACE_S)
        else:
            with faults:
                wait_producer(kube, production, timeout=seconds + PRODUCER_GRACE_S)
        progress("producer done")
        after()
        wait_for_results(redis_link, release, production, timeout=results_timeout)
        progress("every expected result committed; waiting for the clients to catch up")

    def head() -> int:
        log = redis_link.log(release.stream)
        return log[-1].seq if log else 0

    tracked = asyncio.run(run_clients(clients, release.ws_url, release.token, during, head))
    return tracked, production


def check_exactly_once(clients: list[Tracked], production: Production, redis_link: RedisLink, release: Release,
          kube: Kube) -> None:
    log = redis_link.log(release.stream)
    assert_log_exactly_once(log, production, release)
    assert_clients_exactly_once(clients, log, kube.events)
    progress(f"exactly once: {len(clients)} clients, {len(log)} entries in the stream")
