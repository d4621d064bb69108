"""Tokens from the team's identity provider (issue 43, part 6): gateway.auth.jwks.url or
gateway.auth.publicKey.existingSecret instead of a shared secret, with the issuer, the audience and the claim
names, as the gateway would start with them (its own options parse the rendered environment); no token
Secret then, the key Secret mounted as a directory so a rotation reaches the pods; the helm test checks the
401 only (it cannot mint an IdP's token); contradictory values refused at render."""

from __future__ import annotations

import os

import pytest

from sparkwire.cli import build_parser
from sparkwire.gateway.auth.keys import JwksKeys
from sparkwire.gateway.auth.tokens import Verifier
from sparkwire.gateway.settings import auth_problem, token_auth

from .conftest import CHART, FULLNAME, env_of, find, gateway_container, has, render, render_error, resolved_env

JWKS_VALUES = CHART / "ci" / "jwks-values.yaml"
AUTH_SECRET = f"{FULLNAME}-gateway-auth"
IDP = {"gateway.auth.issuer": "https://idp.example.com/", "gateway.auth.audience": "sparkwire"}


def test_jwks_values_give_the_gateway_a_verifier_and_no_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    objects = render([JWKS_VALUES])
    assert not has(objects, "Secret", AUTH_SECRET)
    env = resolved_env(objects)
    assert "SPARKWIRE_AUTH_SECRET" not in env and env["SPARKWIRE_INSECURE_NO_AUTH"] == "false"
    annotations = find(objects, "Deployment")["spec"]["template"]["metadata"].get("annotations") or {}
    assert "checksum/auth-secret" not in annotations
    for name in [n for n in os.environ if n.startswith("SPARKWIRE_")]:
        monkeypatch.delenv(name)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    args = build_parser().parse_args(["gateway"])
    args.auth_secret = ""
    assert auth_problem(args) is None, "the gateway starts with what the chart gives it"
    auth = token_auth(args)
    assert isinstance(auth, Verifier) and isinstance(auth.keys, JwksKeys)
    assert auth.keys.url == "https://idp.example.com/.well-known/jwks.json"
    assert (auth.issuer, auth.audience, auth.streams_claim, auth.scope_claim) == (
        "https://idp.example.com/", "sparkwire", "https://example.com/streams", "https://example.com/scope")


def test_a_public_key_secret_is_mounted_as_a_directory_and_named_by_file() -> None:
    objects = render(sets={**IDP, "gateway.auth.publicKey.existingSecret": "idp-keys",
                           "gateway.auth.publicKey.key": "jwks.json"})
    assert not has(objects, "Secret", AUTH_SECRET)
    container = gateway_container(objects)
    assert env_of(container)["SPARKWIRE_AUTH_PUBLIC_KEY_FILE"]["value"] == "/etc/sparkwire/auth-keys/jwks.json"
    mount = next(m for m in container["volumeMounts"] if m["name"] == "auth-keys")
    assert mount == {"name": "auth-keys", "mountPath": "/etc/sparkwire/auth-keys", "readOnly": True}  # no subPath
    volumes = find(objects, "Deployment")["spec"]["template"]["spec"]["volumes"]
    assert next(v for v in volumes if v["name"] == "auth-keys")["secret"] == {
        "secretName": "idp-keys", "items": [{"key": "jwks.json", "path": "jwks.json"}]}


def test_the_default_install_keeps_the_shared_secret_and_the_default_claims() -> None:
    objects = render()
    env = env_of(gateway_container(objects))
    assert "SPARKWIRE_AUTH_SECRET" in env and "SPARKWIRE_AUTH_JWKS_URL" not in env
    assert (env["SPARKWIRE_AUTH_STREAMS_CLAIM"]["value"], env["SPARKWIRE_AUTH_SCOPE_CLAIM"]["value"]) == \
        ("streams", "scope")
    assert not any(v["name"] == "auth-keys" for v in find(objects, "Deployment")["spec"]["template"]["spec"]["volumes"])


def test_the_helm_test_checks_the_401_without_minting() -> None:
    pod = find(render([JWKS_VALUES], sets={"tests.enabled": True}), "Pod")
    env = env_of(pod["spec"]["containers"][0])
    assert "SPARKWIRE_AUTH_SECRET" not in env and env["SPARKWIRE_TEST_REQUIRE_TOKEN"]["value"] == "true"


@pytest.mark.parametrize(("sets", "named"), [
    ({**IDP, "gateway.auth.jwks.url": "https://idp/jwks", "gateway.auth.publicKey.existingSecret": "k"},
     "only one of gateway.auth.jwks.url and gateway.auth.publicKey.existingSecret"),
    ({**IDP, "gateway.auth.jwks.url": "https://idp/jwks", "gateway.auth.secret": "s" * 32}, "are alternatives"),
    ({**IDP, "gateway.auth.publicKey.existingSecret": "k", "gateway.auth.existingSecret": "e"}, "are alternatives"),
    ({"gateway.auth.jwks.url": "https://idp/jwks", "gateway.auth.issuer": "i"}, "require gateway.auth.issuer and"),
    ({"gateway.auth.publicKey.existingSecret": "k", "gateway.auth.audience": "a"}, "require gateway.auth.issuer"),
    ({**IDP, "gateway.auth.jwks.url": "https://idp/jwks", "gateway.auth.enabled": False}, "enabled is false"),
])
def test_contradictory_values_are_refused_at_render(sets: dict[str, object], named: str) -> None:
    assert named in render_error(sets=sets)


def test_the_schema_refuses_a_jwks_url_that_is_not_http() -> None:
    assert "jwks" in render_error(sets={**IDP, "gateway.auth.jwks.url": "file:///etc/passwd"})
