"""What the release is configured with, read from its SparkApplication and Deployment, and a token minted
with the product's own `sparkwire token` (the secret in the environment, never on the command line)."""

from __future__ import annotations

import base64
import json
import subprocess
import time
from typing import Any

import pytest
from kubernetes import client as k8s

from sparkwire_harness.kind import release as release_module
from sparkwire_harness.kind.release import auth_secret_ref, driver_env, mint_token, read_release
from sparkwire_harness.kind.views import TENANT_FILTER

from .conftest import FakeCore, fake_kube

APP = {"spec": {"driver": {"template": {"spec": {"containers": [
    {"name": "sidecar", "env": [{"name": "SPARKWIRE_STREAM", "value": "wrong"}]},
    {"name": "spark-kubernetes-driver", "env": [
        {"name": "SPARKWIRE_STREAM", "value": "metrics"}, {"name": "SPARKWIRE_BOOTSTRAP_SERVERS", "value": "k:9092"},
        {"name": "SPARKWIRE_TOPIC", "value": "raw"}, {"name": "SPARKWIRE_WINDOW_MS", "value": "10000"},
        {"name": "SPARKWIRE_WATERMARK_DELAY_MS", "value": "5000"}, {"name": "FROM_SECRET"}]}]}}}}}


def gateway(secret: tuple[str, str] | None) -> k8s.V1Deployment:
    env = [k8s.V1EnvVar(name="SPARKWIRE_STREAMS", value="metrics")]
    if secret:
        env.append(k8s.V1EnvVar(name="SPARKWIRE_AUTH_SECRET", value_from=k8s.V1EnvVarSource(
            secret_key_ref=k8s.V1SecretKeySelector(name=secret[0], key=secret[1]))))
    containers = [k8s.V1Container(name="gateway", image="sparkwire-gateway:abc", env=env)]
    return k8s.V1Deployment(spec=k8s.V1DeploymentSpec(
        replicas=3, selector=k8s.V1LabelSelector(),
        template=k8s.V1PodTemplateSpec(spec=k8s.V1PodSpec(containers=containers))))


def test_the_drivers_environment_is_its_containers() -> None:
    env = driver_env(APP)
    assert env["SPARKWIRE_STREAM"] == "metrics" and env["FROM_SECRET"] is None


def test_a_gateway_without_a_token_secret_needs_no_token() -> None:
    assert auth_secret_ref(gateway(None)) is None
    assert auth_secret_ref(gateway(("sparkwire-gateway-auth", "auth-secret"))) == ("sparkwire-gateway-auth",
                                                                                  "auth-secret")


class Custom:
    def get_namespaced_custom_object(self, *_args: Any) -> Any:
        return APP


class Apps:
    def __init__(self, deployment: k8s.V1Deployment) -> None:
        self.deployment = deployment

    def read_namespaced_deployment(self, *_args: Any) -> k8s.V1Deployment:
        return self.deployment


def test_read_release(monkeypatch: pytest.MonkeyPatch) -> None:
    minted: list[tuple[str, str, object]] = []

    def mint(secret: str, stream: str, scope: object = None) -> str:
        minted.append((secret, stream, scope))
        return "scoped" if scope else "tok"

    monkeypatch.setattr(release_module, "mint_token", mint)
    core = FakeCore(secrets={"auth": {"auth-secret": "x" * 32}})
    release = read_release(fake_kube(core, custom=Custom(), apps=Apps(gateway(("auth", "auth-secret")))))
    assert (release.stream, release.bootstrap_servers, release.topic) == ("metrics", "k:9092", "raw")
    assert (release.window_ms, release.delay_ms, release.gateway_image, release.gateway_replicas) == (
        10_000, 5_000, "sparkwire-gateway:abc", 3)
    assert (release.token, release.tenant_token) == ("tok", "scoped")
    assert minted == [("x" * 32, "metrics", None), ("x" * 32, "metrics", {"metrics": dict(TENANT_FILTER)})]
    assert release.ws_url.endswith("/ws?stream=metrics") and release.ws_url.startswith("ws")
    plain = read_release(fake_kube(core, custom=Custom(), apps=Apps(gateway(None))))
    assert plain.token is None and plain.tenant_token is None


def test_a_token_is_minted_by_sparkwire_token_with_the_secret_in_its_environment() -> None:
    calls: list[tuple[list[str], dict[str, Any]]] = []

    def run(command: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
        calls.append((command, kwargs))
        return subprocess.CompletedProcess(command, 0, "eyJ.token\n", "")

    assert mint_token("s" * 32, "metrics", run=run) == "eyJ.token"
    [(command, kwargs)] = calls
    assert command[1:] == ["token", "--secret-env", "SPARKWIRE_E2E_AUTH_SECRET", "--streams", "metrics",
                           "--ttl-ms", "21600000", "--subject", "kind-e2e"]
    assert "s" * 32 not in command and kwargs["env"]["SPARKWIRE_E2E_AUTH_SECRET"] == "s" * 32


def test_a_refused_secret_fails_with_what_sparkwire_token_said() -> None:
    def run(command: list[str], **_kwargs: Any) -> subprocess.CompletedProcess[str]:
        return subprocess.CompletedProcess(command, 2, "", "sparkwire token: error: the secret is shorter\n")

    with pytest.raises(AssertionError, match="exited 2: sparkwire token: error: the secret is shorter"):
        mint_token("short", "metrics", run=run)


def test_the_real_sparkwire_token_takes_these_options() -> None:
    """The options above are the product's (its parser would refuse others): a JWT for the stream."""
    _header, claims, _signature = mint_token("k" * 32, "metrics").split(".")
    payload = json.loads(base64.urlsafe_b64decode(claims + "=" * (-len(claims) % 4)))
    assert payload["sub"] == "kind-e2e" and "metrics" in json.dumps(payload)
    assert payload["exp"] > time.time() + 5 * 3600  # the whole suite


def test_a_tenants_token_carries_its_scope_as_sparkwire_token_reads_it() -> None:
    scope = {"metrics": dict(TENANT_FILTER)}
    _header, claims, _signature = mint_token("k" * 32, "metrics", scope=scope).split(".")
    payload = json.loads(base64.urlsafe_b64decode(claims + "=" * (-len(claims) % 4)))
    assert payload["scope"] == scope
