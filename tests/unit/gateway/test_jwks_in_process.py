"""A gateway verifying tokens against an identity provider's JWKS (issue 43, part 6), in process over the
in-memory log, the JWKS served over real HTTP on a local port: an RS256 token from it is welcomed, a forged
one (another key under its kid, or HS256 keyed with its public key) is closed with 4401, and the HTTP reads
answer 401 the same way."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from starlette.testclient import TestClient

from sparkwire.gateway.auth.keys import JwksKeys
from sparkwire.gateway.auth.tokens import Verifier
from sparkwire.protocol import CloseCode, ErrorFrame, Hello, Welcome, encode_hello, parse_server_frame

from .in_process import STREAM, running_gateway
from .jwks_fakes import AUDIENCE, ISSUER, Idp, SigningKey, hand_made, pem, rsa_key, running

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def idp() -> Iterator[Idp]:
    yield from running([rsa_key("rsa-1")])


@pytest.fixture
def client(idp: Idp) -> Iterator[TestClient]:
    auth = Verifier(JwksKeys(idp.url, refetch_interval_s=0.0, timeout_s=2.0), issuer=ISSUER, audience=AUDIENCE)
    with running_gateway(auth) as (client, _):
        yield client


def forgeries(idp: Idp) -> list[str]:
    claims = {"sub": "attacker", "iss": ISSUER, "aud": AUDIENCE, "streams": ["*"], "exp": int(time.time()) + 600}
    return [SigningKey("rsa-1", "RS256", rsa_key("x").private).token([STREAM]),
            hand_made({"alg": "HS256", "typ": "JWT", "kid": "rsa-1"}, claims, pem(idp.keys[0]))]


def test_an_rs256_token_from_the_jwks_is_welcomed(idp: Idp, client: TestClient) -> None:
    with client.websocket_connect(f"/ws?stream={STREAM}") as ws:
        ws.send_text(encode_hello(Hello(1, None, None, idp.keys[0].token([STREAM]))))
        welcome = parse_server_frame(ws.receive_text())
    assert isinstance(welcome, Welcome)
    assert idp.requests == 1


def test_forged_tokens_get_4401(idp: Idp, client: TestClient) -> None:
    for token in forgeries(idp):
        with client.websocket_connect(f"/ws?stream={STREAM}") as ws:
            ws.send_text(encode_hello(Hello(1, None, None, token)))
            error = parse_server_frame(ws.receive_text())
            assert isinstance(error, ErrorFrame) and error.code == CloseCode.AUTH_FAILED
            assert ws.receive()["code"] == CloseCode.AUTH_FAILED


def test_the_http_reads_take_the_same_tokens(idp: Idp, client: TestClient) -> None:
    good = {"Authorization": f"Bearer {idp.keys[0].token([STREAM])}"}
    assert client.get(f"/snapshot?stream={STREAM}", headers=good).status_code == 200
    assert client.get(f"/history?stream={STREAM}", headers=good).status_code == 200
    assert client.get("/streams", headers=good).json() == {"streams": [STREAM]}
    for token in forgeries(idp):
        for path in ("/snapshot", "/history"):
            response = client.get(f"{path}?stream={STREAM}", headers={"Authorization": f"Bearer {token}"})
            assert response.status_code == 401, (path, response.text)
