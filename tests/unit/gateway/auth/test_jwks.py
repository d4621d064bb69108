"""Tokens from an identity provider (issue 43, part 6): RS256/ES256 verified against a JWKS served over real
HTTP on a local port, keys rotated without a restart, the refetch rate-limited, the key-confusion attack and
``alg: none`` refused, issuer/audience, namespaced claims, and an IdP that is down."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterator

import pytest

from sparkwire.gateway.auth.keys import JwksKeys
from sparkwire.gateway.auth.tokens import AuthError, Grant, Verifier, verify_token
from sparkwire.protocol.close_codes import CloseCode

from ..jwks_fakes import AUDIENCE, ISSUER, Idp, SigningKey, ec_key, hand_made, pem, rsa_key, running

pytestmark = pytest.mark.timeout(60)

STREAM = "metrics"


@pytest.fixture
def idp() -> Iterator[Idp]:
    yield from running([rsa_key("rsa-1"), ec_key("ec-1")])


def verifier(idp: Idp, *, refetch_interval_s: float = 0.0, lifespan_s: float = 300.0, **options: str) -> Verifier:
    keys = JwksKeys(idp.url, refetch_interval_s=refetch_interval_s, lifespan_s=lifespan_s, timeout_s=2.0)
    return Verifier(keys, issuer=ISSUER, audience=AUDIENCE, **options)


def verify(token: str, auth: Verifier, stream: str = STREAM) -> Grant:
    return asyncio.run(verify_token(token, auth, stream))


def refused(token: str, auth: Verifier) -> AuthError:
    with pytest.raises(AuthError) as caught:
        verify(token, auth)
    return caught.value


def test_rs256_and_es256_tokens_from_the_jwks_verify(idp: Idp) -> None:
    auth = verifier(idp)
    for key in idp.keys:
        grant = verify(key.token([STREAM]), auth)
        assert grant.subject == "user-1" and grant.scope is None
    assert idp.requests == 1  # one fetch, then the held keys


def test_a_new_kid_verifies_without_a_restart(idp: Idp) -> None:
    auth = verifier(idp)
    verify(idp.keys[0].token([STREAM]), auth)
    rotated = rsa_key("rsa-2")
    idp.keys = [rotated]  # the IdP rotates: the old key is gone, a new one signs
    assert verify(rotated.token([STREAM]), auth).subject == "user-1"
    assert idp.requests == 2


def test_unknown_kids_fetch_at_most_once_per_interval(idp: Idp) -> None:
    auth = verifier(idp, refetch_interval_s=60.0)
    forger = rsa_key("rsa-1")
    verify(idp.keys[0].token([STREAM]), auth)
    for n in range(20):  # forged kids: refused, and the IdP not asked again within the interval
        assert refused(SigningKey(f"forged-{n}", "RS256", forger.private).token([STREAM]), auth).code \
            == CloseCode.AUTH_FAILED
    assert idp.requests == 1


def test_a_token_signed_by_another_key_under_a_known_kid_is_refused(idp: Idp) -> None:
    auth = verifier(idp)
    impostor = SigningKey("rsa-1", "RS256", rsa_key("x").private)
    error = refused(impostor.token([STREAM]), auth)
    assert error.code == CloseCode.AUTH_FAILED and "signature" in error.reason.lower()


def test_key_confusion_hs256_with_the_public_key_as_secret_is_refused(idp: Idp) -> None:
    auth = verifier(idp)
    public_pem = pem(idp.keys[0])
    claims = {"sub": "attacker", "iss": ISSUER, "aud": AUDIENCE, "streams": ["*"], "exp": int(time.time()) + 600}
    forged = hand_made({"alg": "HS256", "typ": "JWT", "kid": "rsa-1"}, claims, public_pem)
    error = refused(forged, auth)
    assert error.code == CloseCode.AUTH_FAILED and "alg value is not allowed" in error.reason


def test_alg_none_is_refused(idp: Idp) -> None:
    auth = verifier(idp)
    claims = {"sub": "attacker", "iss": ISSUER, "aud": AUDIENCE, "streams": ["*"], "exp": int(time.time()) + 600}
    assert refused(hand_made({"alg": "none", "kid": "rsa-1"}, claims, None), auth).code == CloseCode.AUTH_FAILED


@pytest.mark.parametrize("change", [{"issuer": "https://other.example.com/"}, {"audience": "another-app"},
                                    {"audience": None}])
def test_a_wrong_or_missing_issuer_or_audience_is_refused(idp: Idp, change: dict[str, str | None]) -> None:
    token = idp.keys[0].token([STREAM], **change)  # type: ignore[arg-type]
    assert refused(token, verifier(idp)).code == CloseCode.AUTH_FAILED


def test_an_audience_list_holding_ours_verifies(idp: Idp) -> None:
    token = idp.keys[0].token([STREAM], audience=None, aud=["other", AUDIENCE])
    assert verify(token, verifier(idp)).subject == "user-1"


def test_expired_is_still_4419(idp: Idp) -> None:
    assert refused(idp.keys[1].token([STREAM], ttl=-60), verifier(idp)).code == CloseCode.TOKEN_EXPIRED


def test_namespaced_claims_hold_the_streams_and_the_scope(idp: Idp) -> None:
    auth = verifier(idp, streams_claim="https://example.com/streams", scope_claim="https://example.com/scope")
    token = idp.keys[0].token(**{"https://example.com/streams": [STREAM],
                                 "https://example.com/scope": {STREAM: {"tenant": {"eq": "acme"}}}})
    assert verify(token, auth).scope is not None
    assert refused(idp.keys[0].token(**{"https://example.com/streams": ["other"]}), auth).code \
        == CloseCode.FORBIDDEN_STREAM
    # the default claim names mean nothing under this configuration
    assert refused(idp.keys[0].token([STREAM]), auth).code == CloseCode.FORBIDDEN_STREAM


def test_jwks_down_cached_keys_still_verify_others_refused_with_a_log_line(
        idp: Idp, caplog: pytest.LogCaptureFixture) -> None:
    auth = verifier(idp, lifespan_s=0.01)  # every use refreshes (in the background): the refreshes fail
    verify(idp.keys[0].token([STREAM]), auth)
    idp.stop()
    time.sleep(0.05)  # the held keys are past their lifespan
    with caplog.at_level(logging.WARNING, logger="sparkwire.gateway.auth.keys"):
        assert verify(idp.keys[0].token([STREAM]), auth).subject == "user-1"
        assert verify(idp.keys[1].token([STREAM]), auth).subject == "user-1"
        error = refused(rsa_key("new").token([STREAM]), auth)
    assert error.code == CloseCode.AUTH_FAILED and "'new'" in error.reason
    assert any("could not be fetched" in record.getMessage() for record in caplog.records)


def test_no_key_fetched_yet_and_jwks_down_is_refused_not_raised(idp: Idp) -> None:
    idp.stop()
    assert refused(rsa_key("rsa-1").token([STREAM]), verifier(idp)).code == CloseCode.AUTH_FAILED


def test_a_slow_jwks_fetch_does_not_hold_the_event_loop(idp: Idp) -> None:
    idp.delay_s = 0.5
    auth = verifier(idp)

    async def run() -> tuple[Grant, int]:
        ticks = 0

        async def tick() -> None:
            nonlocal ticks
            while True:
                await asyncio.sleep(0.01)
                ticks += 1

        ticker = asyncio.create_task(tick())
        grant = await verify_token(idp.keys[0].token([STREAM]), auth, STREAM)
        ticker.cancel()
        return grant, ticks

    grant, ticks = asyncio.run(run())
    assert grant.subject == "user-1"
    assert ticks >= 20  # ~50 in the 0.5 s the fetch took: the loop went on serving


def test_concurrent_tokens_share_one_fetch(idp: Idp) -> None:
    idp.delay_s = 0.2
    auth = verifier(idp)

    async def run() -> list[Grant]:
        token = idp.keys[0].token([STREAM])
        return await asyncio.gather(*(verify_token(token, auth, STREAM) for _ in range(10)))

    assert len(asyncio.run(run())) == 10
    assert idp.requests == 1
