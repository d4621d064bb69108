"""Why the kind suite cannot run on this machine, if it cannot: no Docker engine, no kubeconfig context of
the cluster, the release not deployed, no kubectl, no ingress. The suite's conftest skips with the reason,
or fails with it under SPARKWIRE_KIND_REQUIRED=1."""

from __future__ import annotations

import functools
import shutil
import subprocess
from collections.abc import Callable

from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes.client.exceptions import ApiException

from .ingress import http_get
from .settings import CONTEXT, GATEWAY_DEPLOYMENT, HTTP, NAMESPACE
from .tools import Run, kubectl_binary


def docker_problem(which: Callable[[str], str | None] = shutil.which, run: Run = subprocess.run) -> str | None:
    """Why there is no Docker engine to talk to, or None."""
    docker = which("docker")
    if docker is None:
        return "no docker CLI: the kind e2e tests need a Docker engine and the cluster of `make kind-up`"
    try:
        info = run([docker, "info", "--format", "{{.ServerVersion}}"], capture_output=True, text=True, timeout=30)
    except subprocess.TimeoutExpired:
        return "no Docker engine: `docker info` timed out (`make kind-up` starts one)"
    if info.returncode != 0:
        detail = (info.stderr.strip().splitlines() or ["?"])[-1]
        return f"no Docker engine (`docker info`: {detail}): `make kind-up` starts one and creates the cluster"
    return None


def cluster_problem() -> str | None:
    """Why the cluster's API server does not show the release, or None."""
    try:
        contexts, _active = k8s_config.list_kube_config_contexts()  # type: ignore[no-untyped-call]
    except (k8s_config.ConfigException, OSError) as error:
        return f"no kubeconfig ({error}): run `make kind-up`"
    if CONTEXT not in {c["name"] for c in contexts}:
        return f"no kind cluster: the kubeconfig has no context {CONTEXT!r}; run `make kind-up`"
    try:
        apps = k8s.AppsV1Api(k8s_config.new_client_from_config(context=CONTEXT))  # type: ignore[no-untyped-call]
        apps.read_namespaced_deployment(GATEWAY_DEPLOYMENT, NAMESPACE, _request_timeout=10)
    except ApiException as error:
        return (f"sparkwire is not deployed in {CONTEXT}/{NAMESPACE} ({error.status} {error.reason}): "
                "run `make kind-up`")
    except Exception as error:  # unreachable API server: urllib3 errors of many kinds
        return f"the API server of {CONTEXT} does not answer ({type(error).__name__}: {error}): run `make kind-up`"
    return None


@functools.cache
def unavailable() -> str | None:
    """Why the kind tests cannot run here, or None (asked once a session)."""
    problem = docker_problem() or cluster_problem()
    if problem is not None:
        return problem
    if kubectl_binary() is None:
        return "no kubectl (neither release.env's SPARKWIRE_KUBECTL nor on PATH): the tests port-forward to Redis"
    try:
        http_get("/healthz")  # any answer will do: the gateway's /healthz is not routed, the controller's 404 is
    except OSError as error:
        return f"no ingress at {HTTP} ({error}): `make kind-up` installs Traefik and enables the gateway Ingress"
    return None
