"""Tokens verified with a key file (issue 43, part 6): a PEM public key or a JWKS JSON document, read again
when the file changes (a rotated Secret mount), with the same allow-list as the JWKS URL."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import pytest

from sparkwire.gateway.auth.keys import KeyFileKeys, KeyUnavailable
from sparkwire.gateway.auth.tokens import AuthError, Grant, Verifier, check_token, verify_token
from sparkwire.protocol.close_codes import CloseCode

from ..jwks_fakes import AUDIENCE, ISSUER, ec_key, hand_made, pem, rsa_key

STREAM = "metrics"


def write(path: Path, data: bytes, *, bump: int = 0) -> None:
    path.write_bytes(data)
    stat = path.stat()  # a distinct mtime even within the file system's timestamp granularity
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + bump * 1_000_000_000))


def verify(token: str, auth: Verifier) -> Grant:
    return asyncio.run(verify_token(token, auth, STREAM))


def auth_for(path: Path) -> Verifier:
    return Verifier(KeyFileKeys(str(path)), issuer=ISSUER, audience=AUDIENCE)


@pytest.mark.parametrize("make", [rsa_key, ec_key])
def test_a_pem_public_key_verifies_its_tokens(tmp_path: Path, make: type) -> None:
    key = make("k")
    write(tmp_path / "key.pem", pem(key))
    assert verify(key.token([STREAM]), auth_for(tmp_path / "key.pem")).subject == "user-1"


def test_a_rotated_pem_is_read_again_without_a_restart(tmp_path: Path) -> None:
    old, new = rsa_key("old"), ec_key("new")
    path = tmp_path / "key.pem"
    write(path, pem(old))
    auth = auth_for(path)
    assert verify(old.token([STREAM]), auth)
    write(path, pem(new), bump=10)
    assert verify(new.token([STREAM]), auth).subject == "user-1"
    with pytest.raises(AuthError) as caught:
        verify(old.token([STREAM]), auth)
    assert caught.value.code == CloseCode.AUTH_FAILED


def test_a_jwks_file_picks_the_key_by_kid(tmp_path: Path) -> None:
    keys = [rsa_key("a"), ec_key("b")]
    path = tmp_path / "jwks.json"
    write(path, json.dumps({"keys": [key.jwk() for key in keys]}).encode())
    auth = auth_for(path)
    for key in keys:
        assert verify(key.token([STREAM]), auth).subject == "user-1"
    with pytest.raises(AuthError) as caught:
        verify(rsa_key("c").token([STREAM]), auth)
    assert caught.value.code == CloseCode.AUTH_FAILED and "'c'" in caught.value.reason


def test_a_broken_rewrite_keeps_the_keys_read_before(tmp_path: Path) -> None:
    key = rsa_key("k")
    path = tmp_path / "key.pem"
    write(path, pem(key))
    auth = auth_for(path)
    write(path, b"-----BEGIN PUBLIC KEY-----\nnot a key\n", bump=10)
    assert verify(key.token([STREAM]), auth).subject == "user-1"


def test_hs256_signed_with_the_pem_is_refused(tmp_path: Path) -> None:
    key = rsa_key("k")
    write(tmp_path / "key.pem", pem(key))
    claims = {"sub": "x", "iss": ISSUER, "aud": AUDIENCE, "streams": ["*"], "exp": 2_000_000_000}
    with pytest.raises(AuthError) as caught:
        check_token(hand_made({"alg": "HS256"}, claims, pem(key)), auth_for(tmp_path / "key.pem"), STREAM)
    assert caught.value.code == CloseCode.AUTH_FAILED


def test_an_unreadable_file_at_start_raises(tmp_path: Path) -> None:
    with pytest.raises(KeyUnavailable):
        KeyFileKeys(str(tmp_path / "missing.pem"))
