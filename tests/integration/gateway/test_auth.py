"""Auth on: tokens signed with the pod's secret, unexpired, granting the stream."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from pathlib import Path

import jwt
import pytest

from sparkwire.gateway.auth import issue_token
from sparkwire.stack import RedisServer

from .conftest import SECRET, GatewayProcess
from .raw_client import Received, closed_with, collect, open_session


@pytest.fixture
def secured(redis_server: RedisServer, unique_name: str, tmp_path: Path) -> Iterator[GatewayProcess]:
    process = GatewayProcess(tmp_path, redis_server.url, [unique_name, f"{unique_name}-other"],
                             "--auth-secret", SECRET, "--allowed-origins", "https://app.example").start()
    yield process
    process.process.stop()


def hello(token: str | None) -> str:
    return json.dumps({"type": "hello", "v": 1, **({"token": token} if token is not None else {})})


def test_missing_expired_forged_and_foreign_tokens_are_refused(secured: GatewayProcess, unique_name: str) -> None:
    now = int(time.time())
    cases = {
        "missing": (None, 4401),
        "expired": (issue_token(SECRET, [unique_name], 60, now=now - 3600), 4401),
        "forged": (issue_token("not-the-secret-but-long-enough-for-hs256", [unique_name], 60, now=now), 4401),
        "no expiry": (jwt.encode({"streams": [unique_name]}, SECRET, algorithm="HS256"), 4401),
        "garbage": ("a.b.c", 4401),
        "other stream": (issue_token(SECRET, [f"{unique_name}-other"], 60, now=now), 4403),
    }
    for name, (token, code) in cases.items():
        got, texts = asyncio.run(closed_with(secured.ws(unique_name), [hello(token)]))
        assert got == code, f"{name}: {got} {texts}"
        assert json.loads(texts[-1])["code"] == code


def test_a_valid_token_is_accepted(secured: GatewayProcess, unique_name: str) -> None:
    token = issue_token(SECRET, [unique_name], 60, now=int(time.time()))

    async def run() -> Received:
        ws = await open_session(secured.ws(unique_name), {"token": token})
        received = await collect(ws, Received(), until_seq=0, timeout=1)
        await ws.close()
        return received

    received = asyncio.run(run())
    assert received.welcome is not None and received.close_code is None


def test_an_origin_outside_the_allow_list_is_refused(secured: GatewayProcess, unique_name: str) -> None:
    from websockets.asyncio.client import connect
    from websockets.exceptions import ConnectionClosed

    async def run() -> int | None:
        async with connect(secured.ws(unique_name), origin="https://evil.example", open_timeout=5) as ws:  # type: ignore[arg-type]
            try:
                await ws.recv()
                await ws.recv()
            except ConnectionClosed as closed:
                return closed.rcvd.code if closed.rcvd else None
        return None

    assert asyncio.run(run()) == 1008
