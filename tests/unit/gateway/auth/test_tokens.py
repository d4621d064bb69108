"""Token claims checked by type (issue 39): a signed token whose NumericDate claims are not numbers, or whose
``streams`` is not a list of strings, is malformed: 4401 with the reason, not accepted (PyJWT compares the
time claims through int(), which took ``"exp": "<digits>"``) and not taken for an expired token (4409)."""

from __future__ import annotations

import time
from typing import Any

import jwt
import pytest

from sparkwire.gateway.auth.tokens import ALGORITHM, AuthError, check_token
from sparkwire.protocol.close_codes import CloseCode

SECRET = "test-secret-with-enough-bytes-for-hs256"


def token(**claims: Any) -> str:
    now = int(time.time())
    return jwt.encode({"sub": "client", "streams": ["metrics"], "iat": now, "exp": now + 60, **claims}, SECRET,
                      algorithm=ALGORITHM)


def refusal(signed: str) -> AuthError:
    with pytest.raises(AuthError) as refused:
        check_token(signed, SECRET, "metrics")
    return refused.value


@pytest.mark.parametrize(("claims", "named"), [
    ({"exp": str(int(time.time()) + 60)}, "'exp' claim must be a number, not str"),
    ({"exp": str(int(time.time()) - 600)}, "'exp' claim must be a number"),  # malformed, not expired
    ({"exp": True}, "'exp' claim must be a number, not bool"),
    ({"iat": "0"}, "'iat' claim must be a number"),
    ({"nbf": [1]}, "'nbf' claim must be a number, not list"),
    ({"nbf": None}, "'nbf' claim must be a number, not NoneType"),
    ({"streams": "metrics"}, "'streams' claim must be a list of strings"),
    ({"streams": ["metrics", 7]}, "'streams' claim must be a list of strings"),
    ({"streams": {"metrics": 1}}, "'streams' claim must be a list of strings"),
])
def test_a_claim_of_the_wrong_type_is_refused_as_a_malformed_token_with_its_name(claims: dict[str, Any],
                                                                                 named: str) -> None:
    refused = refusal(token(**claims))
    assert refused.code == CloseCode.AUTH_FAILED and named in refused.reason


def test_well_typed_claims_are_accepted_and_the_time_checks_still_hold() -> None:
    now = time.time()
    grant = check_token(token(exp=now + 60.5, nbf=now - 1), SECRET, "metrics")
    assert grant.subject == "client" and grant.expires_at == pytest.approx(now + 65.5)
    assert refusal(token(exp=int(now) - 60)).code == CloseCode.TOKEN_EXPIRED
    assert refusal(token(nbf=int(now) + 600)).code == CloseCode.AUTH_FAILED
    assert refusal(token(iat=int(now) + 600)).code == CloseCode.AUTH_FAILED
    assert refusal(token(streams=["other"])).code == CloseCode.FORBIDDEN_STREAM
    without_exp = jwt.encode({"sub": "client", "streams": ["metrics"]}, SECRET, algorithm=ALGORITHM)
    assert refusal(without_exp).code == CloseCode.AUTH_FAILED
    assert refusal(token(sub=5)).code == CloseCode.AUTH_FAILED  # PyJWT's own check: sub a string
