"""Safe by default: a fresh install requires client tokens signed with a secret the chart generates, keeps
that secret across upgrades and uninstalls, and runs without authentication only when told to; the
Origin allow-list follows the Ingress hosts. The gateway container is checked the way it would start:
its environment parsed by ``sparkwire gateway``'s own options."""

from __future__ import annotations

import argparse
import base64
import hashlib
import os
import re
from typing import Any

import pytest

from sparkwire.cli import build_parser
from sparkwire.gateway.settings import auth_problem

from .conftest import CHART, FULLNAME, env_of, find, gateway_container, has, render, render_error, resolved_env

GATEWAY = f"{FULLNAME}-gateway"
AUTH_SECRET = f"{GATEWAY}-auth"


def parsed(env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> argparse.Namespace:
    for name in [n for n in os.environ if n.startswith("SPARKWIRE_")]:
        monkeypatch.delenv(name)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return build_parser().parse_args(["gateway"])


def test_a_fresh_install_requires_tokens_signed_with_a_generated_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    objects = render()
    secret = find(objects, "Secret", AUTH_SECRET)
    value = base64.b64decode(secret["data"]["auth-secret"]).decode()
    assert re.fullmatch(r"[A-Za-z0-9]{48}", value), "randAlphaNum 48"
    assert secret["metadata"]["annotations"] == {"helm.sh/resource-policy": "keep"}
    env = env_of(gateway_container(objects))
    assert env["SPARKWIRE_AUTH_SECRET"]["valueFrom"]["secretKeyRef"] == {"name": AUTH_SECRET, "key": "auth-secret"}
    assert env["SPARKWIRE_INSECURE_NO_AUTH"]["value"] == "false"
    annotations = find(objects, "Deployment")["spec"]["template"]["metadata"]["annotations"]
    # The same value in the Secret and in the checksum: the helper decides once per render.
    assert annotations["checksum/auth-secret"] == hashlib.sha256(secret["data"]["auth-secret"].encode()).hexdigest()
    args = parsed(resolved_env(objects), monkeypatch)
    assert (args.auth_secret, args.insecure_no_auth) == (value, False)
    assert auth_problem(args) is None, "the gateway starts with what the chart gives it"


def test_every_render_without_a_cluster_generates_a_new_secret() -> None:
    """`helm template` has no live Secret to look up; on a cluster, lookup returns the installed one."""
    first = find(render(sets={"stream": "one"}), "Secret", AUTH_SECRET)["data"]["auth-secret"]
    second = find(render(sets={"stream": "two"}), "Secret", AUTH_SECRET)["data"]["auth-secret"]
    assert first != second
    template = (CHART / "templates" / "_helpers.tpl").read_text()
    assert 'lookup "v1" "Secret" .Release.Namespace (include "sparkwire.gateway.authSecretName" .)' in template


def test_a_given_secret_is_stored_and_not_kept_on_uninstall(monkeypatch: pytest.MonkeyPatch) -> None:
    given = "a-given-secret-of-at-least-32-characters"
    objects = render(sets={"gateway.auth.secret": given})
    secret = find(objects, "Secret", AUTH_SECRET)
    assert base64.b64decode(secret["data"]["auth-secret"]).decode() == given
    assert "annotations" not in secret["metadata"], "the values hold it: nothing to keep"
    assert parsed(resolved_env(objects), monkeypatch).auth_secret == given


def test_kept_secret_can_be_left_to_the_uninstall() -> None:
    secret = find(render(sets={"gateway.auth.keepSecret": False}), "Secret", AUTH_SECRET)
    assert "annotations" not in secret["metadata"]


def test_an_existing_secret_is_referenced(monkeypatch: pytest.MonkeyPatch) -> None:
    objects = render([CHART / "ci" / "existing-secrets-values.yaml"])
    assert not has(objects, "Secret", AUTH_SECRET)
    env = env_of(gateway_container(objects))
    assert env["SPARKWIRE_AUTH_SECRET"]["valueFrom"]["secretKeyRef"] == {"name": "sparkwire-jwt",
                                                                          "key": "hs256-secret"}
    assert env["SPARKWIRE_INSECURE_NO_AUTH"]["value"] == "false"
    assert "checksum/auth-secret" not in (find(objects, "Deployment")["spec"]["template"]["metadata"]
                                          .get("annotations") or {})
    existing = {"sparkwire-jwt": {"hs256-secret": "s" * 40}, "sparkwire-redis-credentials": {"password": "p"}}
    args = parsed(resolved_env(objects, existing), monkeypatch)
    assert args.auth_secret == "s" * 40 and auth_problem(args) is None


def test_opting_out_is_explicit(monkeypatch: pytest.MonkeyPatch) -> None:
    objects = render([CHART / "ci" / "no-auth-values.yaml"])
    assert not has(objects, "Secret", AUTH_SECRET)
    env = env_of(gateway_container(objects))
    assert "SPARKWIRE_AUTH_SECRET" not in env
    assert env["SPARKWIRE_INSECURE_NO_AUTH"]["value"] == "true"
    assert "checksum/auth-secret" not in (find(objects, "Deployment")["spec"]["template"]["metadata"]
                                          .get("annotations") or {})
    args = parsed(resolved_env(objects), monkeypatch)
    assert (args.auth_secret, args.insecure_no_auth, auth_problem(args)) == ("", True, None)
    values = (CHART / "values.yaml").read_text()
    assert re.search(r"# -- Require a signed token.*?reads every stream.*?\n    enabled: true\n", values, re.S), (
        "the opt-out's comment says what it exposes")


@pytest.mark.parametrize(("sets", "message"), [
    pytest.param({"gateway.auth.enabled": False, "gateway.auth.secret": "x" * 40},
                 "gateway.auth.enabled is false but gateway.auth.secret or .existingSecret is set",
                 id="off-with-secret"),
    pytest.param({"gateway.auth.enabled": False, "gateway.auth.existingSecret": "jwt"},
                 "gateway.auth.enabled is false but", id="off-with-existing-secret"),
    pytest.param({"gateway.auth.secret": "too-short"}, "gateway.auth.secret has 9 characters: HS256 needs at least 32",
                 id="short-secret"),
])
def test_contradicting_or_weak_auth_values_are_refused(sets: dict[str, Any], message: str) -> None:
    assert message in render_error(sets=sets)


def _origins(sets: dict[str, Any]) -> tuple[str, str]:
    env = env_of(gateway_container(render(sets=sets)))
    return env["SPARKWIRE_ALLOWED_ORIGINS"]["value"], env["SPARKWIRE_ALLOW_MISSING_ORIGIN"]["value"]


@pytest.mark.parametrize(("sets", "origins"), [
    pytest.param({}, "", id="no-ingress-any-origin"),
    pytest.param({"gateway.ingress.enabled": True}, "", id="ingress-without-hosts-any-origin"),
    pytest.param({"gateway.ingress.enabled": True, "gateway.ingress.hosts": ["ws.example.com", "b.example.com"],
                  "gateway.ingress.tls": [{"secretName": "t", "hosts": ["ws.example.com"]}]},
                 "https://ws.example.com,http://b.example.com", id="ingress-hosts-own-origins"),
    pytest.param({"gateway.ingress.enabled": True, "gateway.ingress.hosts": ["ws.example.com"],
                  "gateway.config.allowedOrigins": ["https://app.example.com"]},
                 "https://app.example.com", id="explicit-list-wins"),
    pytest.param({"gateway.ingress.hosts": ["ws.example.com"]}, "", id="hosts-without-ingress-ignored"),
])
def test_allowed_origins_follow_the_ingress_hosts(sets: dict[str, Any], origins: str) -> None:
    assert _origins(sets) == (origins, "false")


def test_missing_origins_can_be_allowed() -> None:
    assert _origins({"gateway.config.allowedOrigins": ["https://a.example"],
                     "gateway.config.allowMissingOrigin": True}) == ("https://a.example", "true")
