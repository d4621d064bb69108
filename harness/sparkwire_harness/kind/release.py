"""What the deployed release is configured with, read from the cluster (not assumed): the stream, Kafka and
window settings from the aggregator's SparkApplication, the gateway image and replicas from its Deployment,
and a client token signed with the secret the gateways read."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kubernetes import client as k8s

from .ingress import ws_url
from .kube import Kube
from .objects import container
from .tools import Run
from .views import TENANT_FILTER

TOKEN_LIFETIME_S = 6 * 3600  # longer than the whole suite


@dataclass(frozen=True)
class Release:
    stream: str
    bootstrap_servers: str
    topic: str
    window_ms: int
    delay_ms: int
    gateway_image: str
    gateway_replicas: int
    token: str | None  # None when the release runs with gateway.auth.enabled=false
    # The same grant scoped to one tenant's rows (views.TENANT_FILTER), as a backend mints a tenant's token.
    tenant_token: str | None = None

    @property
    def ws_url(self) -> str:
        return ws_url(self.stream)


def driver_env(app: dict[str, Any]) -> dict[str, str | None]:
    """The environment of the driver container in a SparkApplication's driver template."""
    [driver] = [c for c in app["spec"]["driver"]["template"]["spec"]["containers"]
                if c["name"] == "spark-kubernetes-driver"]
    return {e["name"]: e.get("value") for e in driver.get("env", [])}


def read_release(kube: Kube) -> Release:
    env = driver_env(kube.spark_application())
    gateway = kube.gateway_deployment()
    assert gateway.spec is not None and gateway.spec.template.spec is not None, gateway
    stream = str(env["SPARKWIRE_STREAM"])
    return Release(
        stream=stream, bootstrap_servers=str(env["SPARKWIRE_BOOTSTRAP_SERVERS"]),
        topic=str(env["SPARKWIRE_TOPIC"]), window_ms=int(str(env["SPARKWIRE_WINDOW_MS"])),
        delay_ms=int(str(env["SPARKWIRE_WATERMARK_DELAY_MS"])),
        gateway_image=str(gateway.spec.template.spec.containers[0].image),
        gateway_replicas=gateway.spec.replicas if gateway.spec.replicas is not None else 1,
        token=client_token(kube, gateway, stream),
        tenant_token=client_token(kube, gateway, stream, scope={stream: dict(TENANT_FILTER)}),
    )


def auth_secret_ref(gateway: k8s.V1Deployment) -> tuple[str, str] | None:
    """(Secret, key) of the gateway container's SPARKWIRE_AUTH_SECRET, or None when it has none."""
    assert gateway.spec is not None and gateway.spec.template.spec is not None, gateway
    refs = [ref for e in container(gateway.spec.template.spec, "gateway").env or []
            if e.name == "SPARKWIRE_AUTH_SECRET" and e.value_from is not None
            and (ref := e.value_from.secret_key_ref) is not None]
    return (str(refs[0].name), str(refs[0].key)) if refs else None


def client_token(kube: Kube, gateway: k8s.V1Deployment, stream: str,
                 scope: Mapping[str, object] | None = None) -> str | None:
    """A token for ``stream`` (restricted to ``scope``'s rows, if given) signed with the secret the gateways
    read (the chart generates it on a fresh install), long enough for the whole run; None when the gateways
    run without authentication."""
    ref = auth_secret_ref(gateway)
    if ref is None:
        return None
    return mint_token(kube.secret_value(ref[0], (ref[1],)), stream, scope=scope)


def sparkwire_command() -> str:
    """The product's `sparkwire` command of this interpreter's environment (else the one on PATH)."""
    beside = Path(sys.executable).with_name("sparkwire")
    return str(beside) if beside.is_file() else shutil.which("sparkwire") or "sparkwire"


def mint_token(secret: str, stream: str, run: Run = subprocess.run, *,
               scope: Mapping[str, object] | None = None) -> str:
    """`sparkwire token`, as the chart's NOTES tell an operator to mint one (the secret in the environment,
    never on the command line); with ``scope``, its ``--scope`` (stream -> filter), as for one tenant."""
    command = [sparkwire_command(), "token", "--secret-env", "SPARKWIRE_E2E_AUTH_SECRET", "--streams", stream,
               "--ttl-ms", str(TOKEN_LIFETIME_S * 1000), "--subject", "kind-e2e"]
    if scope is not None:
        command += ["--scope", json.dumps(scope)]
    done = run(command, capture_output=True, text=True, timeout=60,
               env={**os.environ, "SPARKWIRE_E2E_AUTH_SECRET": secret})
    if done.returncode != 0 or not done.stdout.strip():
        raise AssertionError(f"`{' '.join(command)}` exited {done.returncode}: {done.stderr.strip()}")
    return str(done.stdout.strip())
