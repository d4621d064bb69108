"""Auth on: tokens signed with the pod's secret, unexpired, granting the stream; the Origin allow-list,
a missing Origin included; a gateway that would run without auth by accident refuses to start."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import jwt
import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed
from websockets.typing import Origin

from sparkwire.gateway.auth.tokens import issue_token
from sparkwire_harness.stack import RedisServer
from sparkwire_harness.stack.ports import free_port

from .conftest import SECRET, GatewayProcess, http_status
from .raw_client import Received, closed_with, collect, open_session


@pytest.fixture
def secured(redis_server: RedisServer, unique_name: str, tmp_path: Path) -> Iterator[GatewayProcess]:
    # The raw test clients send no Origin: allowed here, so these tests are about tokens only.
    process = GatewayProcess(tmp_path, redis_server.url, [unique_name, f"{unique_name}-other"],
                             "--allowed-origins", "https://app.example", "--allow-missing-origin",
                             auth_secret=SECRET).start()
    yield process
    process.process.stop()


def hello(token: str | None) -> str:
    return json.dumps({"type": "hello", "v": 1, **({"token": token} if token is not None else {})})


def test_missing_expired_forged_and_foreign_tokens_are_refused(secured: GatewayProcess, unique_name: str) -> None:
    now = int(time.time())
    cases = {
        "missing": (None, 4401),
        "forged": (issue_token("not-the-secret-but-long-enough-for-hs256", [unique_name], 60, now=now), 4401),
        "no expiry": (jwt.encode({"streams": [unique_name]}, SECRET, algorithm="HS256"), 4401),
        "garbage": ("a.b.c", 4401),
        "other stream": (issue_token(SECRET, [f"{unique_name}-other"], 60, now=now), 4403),
    }
    for name, (token, code) in cases.items():
        got, texts = asyncio.run(closed_with(secured.ws(unique_name), [hello(token)]))
        assert got == code, f"{name}: {got} {texts}"
        assert json.loads(texts[-1])["code"] == code
    # Expired is resumable (4419, tests in test_token_expiry.py): a client with a fresh token goes on.
    # Still the client's doing, so the error frame says why.
    expired = issue_token(SECRET, [unique_name], 60, now=now - 3600)
    got, texts = asyncio.run(closed_with(secured.ws(unique_name), [hello(expired)]))
    assert got == 4419 and [json.loads(text)["code"] for text in texts] == [4419], texts


def test_a_valid_token_is_accepted(secured: GatewayProcess, unique_name: str) -> None:
    token = issue_token(SECRET, [unique_name], 60, now=int(time.time()))

    async def run() -> Received:
        ws = await open_session(secured.ws(unique_name), {"token": token})
        received = await collect(ws, Received(), until_seq=0, timeout=1)
        await ws.close()
        return received

    received = asyncio.run(run())
    assert received.welcome is not None and received.close_code is None


async def origin_outcome(url: str, origin: str | None, token: str | None = None) -> tuple[int | None, list[str]]:
    """Connect with ``origin`` (None: no Origin header at all) and say hello; the close code (None: the
    connection was welcomed) and the text frames received."""
    texts: list[str] = []
    async with connect(url, origin=Origin(origin) if origin is not None else None, open_timeout=5) as ws:
        with contextlib.suppress(ConnectionClosed):  # a refused connection may close before the hello goes out
            await ws.send(hello(token))
        try:
            async with asyncio.timeout(5):
                while True:
                    message = await ws.recv()
                    texts.append(message if isinstance(message, str) else message.decode())
                    if json.loads(texts[-1])["type"] == "welcome":
                        return None, texts
        except ConnectionClosed as closed:
            return (closed.rcvd.code if closed.rcvd else None), texts
    raise AssertionError("unreachable")


def test_an_origin_outside_the_allow_list_is_refused(secured: GatewayProcess, unique_name: str) -> None:
    code, texts = asyncio.run(origin_outcome(secured.ws(unique_name), "https://evil.example"))
    assert code == 1008
    error = json.loads(texts[-1])
    assert (error["type"], error["code"]) == ("error", 1008)
    assert error["reason"] == "origin 'https://evil.example' not allowed"


@pytest.mark.parametrize(("allow_missing", "origin", "expected"), [
    pytest.param(None, None, 1008, id="missing-refused-by-default"),
    pytest.param("--no-allow-missing-origin", None, 1008, id="missing-refused"),
    pytest.param("--allow-missing-origin", None, None, id="missing-allowed-when-configured"),
    pytest.param(None, "https://app.example", None, id="listed-accepted"),
    pytest.param("--allow-missing-origin", "https://evil.example", 1008, id="wrong-refused-even-if-missing-allowed"),
])
def test_a_missing_origin_is_refused_unless_allowed(redis_server: RedisServer, unique_name: str, tmp_path: Path,
                                                     allow_missing: str | None, origin: str | None,
                                                     expected: int | None) -> None:
    extra = ["--allowed-origins", "https://app.example"]
    if allow_missing is not None:
        extra += [allow_missing]
    process = GatewayProcess(tmp_path, redis_server.url, [unique_name], *extra, auth_secret=SECRET).start()
    try:
        token = issue_token(SECRET, [unique_name], 60, now=int(time.time()))
        code, texts = asyncio.run(origin_outcome(process.ws(unique_name), origin, token))
    finally:
        process.stop()
    assert code == expected, texts
    if expected is not None:
        assert json.loads(texts[-1])["code"] == expected


def test_without_an_allow_list_no_origin_is_needed(gateway: GatewayProcess, unique_name: str) -> None:
    assert asyncio.run(origin_outcome(gateway.ws(unique_name), None))[0] is None
    assert asyncio.run(origin_outcome(gateway.ws(unique_name), "https://anywhere.example"))[0] is None


def _start_gateway(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``sparkwire gateway`` with ``args``, stopped after a few seconds if it starts serving."""
    environment = {k: v for k, v in os.environ.items() if not k.startswith("SPARKWIRE_")}
    command = [sys.executable, "-m", "sparkwire.cli", "gateway", "--port", str(free_port()),
               "--redis-url", "redis://127.0.0.1:1/0", *args]
    try:
        return subprocess.run(command, env={**environment, **(env or {})}, capture_output=True, text=True,
                              timeout=15, check=False)
    except subprocess.TimeoutExpired as expired:
        raise AssertionError(f"the gateway kept running: {expired.stderr!r}") from None


@pytest.mark.parametrize(("args", "env", "message"), [
    pytest.param([], {}, "no token secret: the gateway requires signed client tokens; set SPARKWIRE_AUTH_SECRET "
                 "or pass --auth-secret-file PATH", id="no-secret"),
    pytest.param([], {"SPARKWIRE_AUTH_SECRET": ""}, "no token secret", id="empty-secret"),
    pytest.param([], {"SPARKWIRE_AUTH_SECRET": "x" * 31}, "shorter than 32 bytes", id="short-secret"),
    pytest.param(["--insecure-no-auth"], {"SPARKWIRE_AUTH_SECRET": SECRET}, "contradict",
                 id="secret-and-opt-out"),
    # The secret never as a flag's value (ps shows it): the environment or a file.
    pytest.param(["--auth-secret", SECRET], {}, "--auth-secret does not take the secret on the command line",
                 id="secret-as-a-flag"),
    pytest.param(["--auth-secret-file", "/nonexistent/secret"], {}, "--auth-secret-file /nonexistent/secret: "
                 "cannot read it", id="unreadable-secret-file"),
    pytest.param(["--auth-secret-file", "/dev/null"], {}, "no token secret", id="empty-secret-file"),
    pytest.param(["--auth-secret-file", "/dev/null"], {"SPARKWIRE_AUTH_SECRET": SECRET},
                 "both SPARKWIRE_AUTH_SECRET and --auth-secret-file are set", id="secret-twice"),
])
def test_a_gateway_without_a_usable_secret_refuses_to_start(args: list[str], env: dict[str, str],
                                                            message: str) -> None:
    done = _start_gateway(*args, env=env)
    assert done.returncode == 2 and message in done.stderr, (done.returncode, done.stderr)


def test_the_explicit_opt_out_starts_with_a_loud_warning(redis_server: RedisServer, unique_name: str,
                                                         tmp_path: Path) -> None:
    process = GatewayProcess(tmp_path, redis_server.url, [unique_name]).start()
    try:
        assert "AUTHENTICATION IS OFF" in process.process.log_tail(200)
        assert asyncio.run(origin_outcome(process.ws(unique_name), None))[0] is None, "no token needed"
    finally:
        process.stop()


def test_the_rest_snapshot_needs_the_same_token(secured: GatewayProcess, unique_name: str) -> None:
    def get(token: str | None, scheme: str = "Bearer") -> int:
        request = urllib.request.Request(f"{secured.http}/snapshot?stream={unique_name}",
                                         headers={"Authorization": f"{scheme} {token}"} if token else {})
        try:
            with urllib.request.urlopen(request, timeout=5) as response:
                return int(response.status)
        except urllib.error.HTTPError as error:
            return int(error.code)

    now = int(time.time())
    assert get(None) == 401
    assert get("a.b.c") == 401
    assert get(issue_token(SECRET, [unique_name], 60, now=now), scheme="Basic") == 401
    assert get(issue_token(SECRET, [f"{unique_name}-other"], 60, now=now)) == 403
    assert get(issue_token(SECRET, [unique_name], 60, now=now)) == 200


def test_without_auth_the_rest_snapshot_is_open(gateway: GatewayProcess, unique_name: str) -> None:
    assert http_status(f"{gateway.http}/snapshot?stream={unique_name}") == 200
