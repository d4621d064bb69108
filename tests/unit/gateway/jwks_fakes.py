"""An identity provider for tests (issue 43, part 6): RS256 and ES256 keys made with ``cryptography``, tokens
signed with them, and their JWKS served over real HTTP from a local server on a free port (stoppable, to play
an IdP that is down; slowable, to show a fetch does not hold the event loop)."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import jwt
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

ISSUER = "https://idp.example.com/"
AUDIENCE = "sparkwire"


@dataclass
class SigningKey:
    kid: str
    algorithm: str
    private: Any

    def jwk(self) -> dict[str, Any]:
        algorithm = jwt.get_algorithm_by_name(self.algorithm)
        document: dict[str, Any] = json.loads(algorithm.to_jwk(self.private.public_key()))
        return {**document, "kid": self.kid, "use": "sig", "alg": self.algorithm}

    def token(self, streams: list[str] | None = None, *, issuer: str = ISSUER, audience: str | None = AUDIENCE,
              ttl: int = 600, headers: dict[str, Any] | None = None, **claims: Any) -> str:
        now = int(time.time())
        body: dict[str, Any] = {"sub": "user-1", "iss": issuer, "iat": now, "exp": now + ttl, **claims}
        if audience is not None:
            body["aud"] = audience
        if streams is not None:
            body["streams"] = streams
        return jwt.encode(body, self.private, algorithm=self.algorithm,
                          headers={"kid": self.kid, **(headers or {})})


def pem(key: SigningKey) -> bytes:
    """The key's public half as a PEM file holds it."""
    return bytes(key.private.public_key().public_bytes(Encoding.PEM, PublicFormat.SubjectPublicKeyInfo))


def rsa_key(kid: str) -> SigningKey:
    return SigningKey(kid, "RS256", rsa.generate_private_key(public_exponent=65537, key_size=2048))


def ec_key(kid: str) -> SigningKey:
    return SigningKey(kid, "ES256", ec.generate_private_key(ec.SECP256R1()))


@dataclass
class Idp:
    """The JWKS of ``keys`` at ``url`` (``/jwks``); ``requests`` counts the fetches it answered."""

    keys: list[SigningKey]
    delay_s: float = 0.0
    requests: int = 0
    server: ThreadingHTTPServer | None = field(default=None, repr=False)

    port: int = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/jwks"

    def stop(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
            self.server = None


def serve(keys: list[SigningKey]) -> Idp:
    idp = Idp(keys)

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            idp.requests += 1
            time.sleep(idp.delay_s)
            body = json.dumps({"keys": [key.jwk() for key in idp.keys]}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            return None

    idp.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    idp.port = idp.server.server_address[1]
    threading.Thread(target=idp.server.serve_forever, daemon=True).start()
    return idp


def running(keys: list[SigningKey]) -> Iterator[Idp]:
    """For a fixture: the IdP serving ``keys``, stopped after the test."""
    idp = serve(keys)
    try:
        yield idp
    finally:
        idp.stop()


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def hand_made(header: dict[str, object], claims: dict[str, object], secret: bytes | None) -> str:
    """A token PyJWT would refuse to make: HS256 keyed with a public key, or unsigned."""
    signing_input = f"{b64(json.dumps(header).encode())}.{b64(json.dumps(claims).encode())}"
    signature = b"" if secret is None else hmac.new(secret, signing_input.encode(), hashlib.sha256).digest()
    return f"{signing_input}.{b64(signature)}"
