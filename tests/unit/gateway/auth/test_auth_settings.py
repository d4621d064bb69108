"""The gateway's token options (issue 43, part 6): exactly one way of verifying tokens (a secret, a JWKS URL,
a key file) unless --insecure-no-auth; issuer and audience required with an identity provider's keys; the
secret alone verifies as before."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from sparkwire.gateway.auth.keys import HmacKey, JwksKeys, KeyFileKeys
from sparkwire.gateway.auth.tokens import Verifier
from sparkwire.gateway.settings import add_arguments, auth_problem, token_auth

from ..jwks_fakes import ec_key, pem

SECRET = "s" * 32


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("SECRET", "JWKS_URL", "PUBLIC_KEY_FILE", "ISSUER", "AUDIENCE", "STREAMS_CLAIM", "SCOPE_CLAIM"):
        monkeypatch.delenv(f"SPARKWIRE_AUTH_{name}", raising=False)
    monkeypatch.delenv("SPARKWIRE_INSECURE_NO_AUTH", raising=False)


def options(*argv: str, secret: str = "") -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    args = parser.parse_args(list(argv))
    args.auth_secret = secret
    return args


def test_the_secret_alone_is_the_hs256_secret_as_before() -> None:
    args = options(secret=SECRET)
    assert auth_problem(args) is None and token_auth(args) == SECRET


def test_the_secret_with_an_issuer_checks_it_too() -> None:
    auth = token_auth(options("--auth-issuer", "me", secret=SECRET))
    assert isinstance(auth, Verifier) and isinstance(auth.keys, HmacKey) and auth.issuer == "me"


def test_a_jwks_url_with_issuer_and_audience() -> None:
    args = options("--auth-jwks-url", "https://idp/jwks", "--auth-issuer", "https://idp/", "--auth-audience", "sw",
                   "--auth-streams-claim", "https://example.com/streams")
    assert auth_problem(args) is None
    auth = token_auth(args)
    assert isinstance(auth, Verifier) and isinstance(auth.keys, JwksKeys)
    assert (auth.issuer, auth.audience, auth.streams_claim, auth.scope_claim) == \
        ("https://idp/", "sw", "https://example.com/streams", "scope")


def test_a_key_file(tmp_path: Path) -> None:
    (tmp_path / "key.pem").write_bytes(pem(ec_key("k")))
    args = options("--auth-public-key-file", str(tmp_path / "key.pem"), "--auth-issuer", "i", "--auth-audience", "a")
    assert auth_problem(args) is None
    auth = token_auth(args)
    assert isinstance(auth, Verifier) and isinstance(auth.keys, KeyFileKeys)


@pytest.mark.parametrize(("argv", "secret", "expected"), [
    (["--auth-jwks-url", "https://idp/jwks", "--auth-issuer", "i", "--auth-audience", "a"], SECRET, "alternatives"),
    (["--auth-jwks-url", "https://idp/jwks", "--auth-public-key-file", "/k", "--auth-issuer", "i",
      "--auth-audience", "a"], "", "alternatives"),
    (["--auth-jwks-url", "https://idp/jwks", "--auth-audience", "a"], "", "requires --auth-issuer and"),
    (["--auth-jwks-url", "https://idp/jwks", "--auth-issuer", "i"], "", "requires --auth-issuer and"),
    (["--auth-jwks-url", "https://idp/jwks", "--auth-issuer", "i", "--auth-audience", "a", "--insecure-no-auth"], "",
     "contradict"),
    (["--auth-public-key-file", "/nonexistent/key.pem", "--auth-issuer", "i", "--auth-audience", "a"], "",
     "cannot be read"),
    ([], "", "no token secret"),
])
def test_refused_configurations_name_the_fix(argv: list[str], secret: str, expected: str) -> None:
    problem = auth_problem(options(*argv, secret=secret))
    assert problem is not None and expected in problem


def test_the_options_have_environment_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPARKWIRE_AUTH_JWKS_URL", "https://idp/jwks")
    monkeypatch.setenv("SPARKWIRE_AUTH_ISSUER", "i")
    monkeypatch.setenv("SPARKWIRE_AUTH_AUDIENCE", "a")
    monkeypatch.setenv("SPARKWIRE_AUTH_SCOPE_CLAIM", "https://example.com/scope")
    args = options()
    assert auth_problem(args) is None
    auth = token_auth(args)
    assert isinstance(auth, Verifier) and auth.scope_claim == "https://example.com/scope"
