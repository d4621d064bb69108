"""The token's ``scope`` claim (issue 43): stream -> filter, ``"*"`` for the streams it does not name; a
malformed one makes the token malformed (4401, naming the scope)."""

from __future__ import annotations

import time

import jwt
import pytest

from sparkwire.gateway.auth.tokens import ALGORITHM, AuthError, check_token, issue_token
from sparkwire.protocol.close_codes import CloseCode
from sparkwire.protocol.filter_form import parse_filter

SECRET = "test-secret-with-enough-bytes-for-hs256"


def scoped(scope: object) -> str:
    now = int(time.time())
    return jwt.encode({"sub": "c", "streams": ["*"], "iat": now, "exp": now + 60, "scope": scope}, SECRET,
                      algorithm=ALGORITHM)


def test_the_scope_of_the_stream_or_of_every_other_stream() -> None:
    signed = scoped({"orders": {"tenant": "acme"}, "*": {"tenant": "globex"}})
    assert check_token(signed, SECRET, "orders").scope == parse_filter({"tenant": "acme"})
    assert check_token(signed, SECRET, "metrics").scope == parse_filter({"tenant": "globex"})
    assert check_token(scoped({"orders": {"tenant": "acme"}}), SECRET, "metrics").scope is None


def test_a_token_without_a_scope_reads_every_row() -> None:
    assert check_token(issue_token(SECRET, ["metrics"], 60, now=int(time.time())), SECRET, "metrics").scope is None


def test_issue_token_writes_the_scope_in_the_filter_form() -> None:
    signed = issue_token(SECRET, ["orders"], 60, now=int(time.time()), scope={"orders": parse_filter({"tenant": "a"})})
    assert check_token(signed, SECRET, "orders").scope == parse_filter({"tenant": "a"})


@pytest.mark.parametrize("scope", [["acme"], {"orders": {"tenant": None}}, {"orders": {"n": {"gt": "x"}}},
                                   {"orders": "acme"}])
def test_a_malformed_scope_is_a_malformed_token(scope: object) -> None:
    with pytest.raises(AuthError) as refused:
        check_token(scoped(scope), SECRET, "orders")
    assert refused.value.code == CloseCode.AUTH_FAILED and "scope" in refused.value.reason
