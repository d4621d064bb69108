"""``sparkwire token``: the secret from an environment variable, the token the gateway checks."""

from __future__ import annotations

import time

import jwt
import pytest

from sparkwire.cli import main
from sparkwire.gateway.auth.tokens import check_token

SECRET = "s" * 40


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exited:
        main(["token", *argv])
    out, err = capsys.readouterr()
    return int(exited.value.code or 0), out, err


def test_prints_a_token_the_gateway_accepts(monkeypatch: pytest.MonkeyPatch,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("MY_SECRET", SECRET)
    code, out, _ = run(["--secret-env", "MY_SECRET", "--streams", "metrics,other", "--ttl-ms", "60000",
                        "--subject", "alice"], capsys)
    assert code == 0
    token = out.strip()
    check_token(token, SECRET, "other")
    claims = jwt.decode(token, SECRET, algorithms=["HS256"])
    assert claims["sub"] == "alice" and claims["streams"] == ["metrics", "other"]
    assert abs(claims["exp"] - (time.time() + 60)) < 5


@pytest.mark.parametrize(("secret", "message"), [
    (None, "SPARKWIRE_AUTH_SECRET is not set"),
    ("too-short", "shorter than 32 bytes"),
])
def test_refuses_without_a_usable_secret(secret: str | None, message: str, monkeypatch: pytest.MonkeyPatch,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.delenv("SPARKWIRE_AUTH_SECRET", raising=False)
    if secret is not None:
        monkeypatch.setenv("SPARKWIRE_AUTH_SECRET", secret)
    code, out, err = run([], capsys)
    assert code == 2 and out == "" and message in err


def test_scope_restricts_the_token_to_a_tenants_rows(monkeypatch: pytest.MonkeyPatch,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("SPARKWIRE_AUTH_SECRET", SECRET)
    code, out, _ = run(["--streams", "orders", "--scope", '{"orders": {"tenant": "acme"}}'], capsys)
    assert code == 0
    grant = check_token(out.strip(), SECRET, "orders")
    assert grant.scope is not None
    assert jwt.decode(out.strip(), SECRET, algorithms=["HS256"])["scope"] == {"orders": {"tenant": {"eq": "acme"}}}


@pytest.mark.parametrize(("scope", "message"), [
    ("{not json", "--scope is not a valid scope (JSON)"),
    ('{"orders": {"tenant": {"gt": "acme"}}}', "--scope is not a valid scope (filter): scope.orders.tenant.gt"),
    ('["orders"]', "scope must be an object"),
])
def test_a_bad_scope_is_refused_with_its_reason(scope: str, message: str, monkeypatch: pytest.MonkeyPatch,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("SPARKWIRE_AUTH_SECRET", SECRET)
    code, out, err = run(["--streams", "orders", "--scope", scope], capsys)
    assert code == 2 and out == ""
    assert message in err
