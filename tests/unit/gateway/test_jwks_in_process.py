"""A gateway verifying tokens against an identity provider's JWKS (issue 43, part 6), in process over the
in-memory log, the JWKS served over real HTTP on a local port: an RS256 token from it is welcomed, a forged
one (another key under its kid, or HS256 keyed with its public key) is closed with 4401, and the HTTP reads
answer 401 the same way."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from starlette.testclient import TestClient

from sparkwire.gateway.app import create_app
from sparkwire.gateway.auth.keys import JwksKeys
from sparkwire.gateway.auth.tokens import Verifier
from sparkwire.gateway.pod import Gateway
from sparkwire.gateway.settings import ConnectionSettings
from sparkwire.gateway.store.session_store import SessionStore
from sparkwire.protocol import CloseCode, ErrorFrame, Hello, Welcome, encode_hello, parse_server_frame
from sparkwire.replaylog.memory import MemoryBackend

from .jwks_fakes import AUDIENCE, ISSUER, Idp, SigningKey, hand_made, pem, rsa_key, running

pytestmark = pytest.mark.timeout(60)

STREAM = "metrics"


@pytest.fixture
def idp() -> Iterator[Idp]:
    yield from running([rsa_key("rsa-1")])


@pytest.fixture
def client(idp: Idp) -> Iterator[TestClient]:
    backend = MemoryBackend()
    auth = Verifier(JwksKeys(idp.url, refetch_interval_s=0.0, timeout_s=2.0), issuer=ISSUER, audience=AUDIENCE)
    settings = ConnectionSettings(ack_every=10, ack_interval_ms=1000, hello_timeout_s=5, max_client_frame_bytes=8192,
                                  max_server_frame_bytes=1 << 20, page_size=50, auth_secret=auth)
    sessions = SessionStore(backend.sessions, ttl_seconds=60, pod="in-process", flush_interval_s=0.05)
    app = create_app(Gateway(backend=backend, streams=[STREAM], connection=settings, sessions=sessions,
                             allowed_origins=frozenset(), ring_size=100, send_queue=256))
    with TestClient(app) as client:
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
