"""A token is enforced for as long as the connection lasts: when it expires the gateway closes with the
resumable 4419, and a client with a token refresh hook resumes at once with a fresh token, missing
nothing and repeating nothing; a client without one stops (4419 is final for it)."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis as redis_lib
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from sparkwire.client import StreamClient, TerminalClose
from sparkwire.gateway.auth.tokens import LEEWAY_SECONDS, issue_token
from sparkwire_harness.stack import RedisServer

from .conftest import SECRET, Committer, GatewayProcess, stop_at_head


@pytest.fixture
def secured(redis_server: RedisServer, unique_name: str, tmp_path: Path) -> Iterator[GatewayProcess]:
    process = GatewayProcess(tmp_path, redis_server.url, [unique_name], auth_secret=SECRET).start()
    yield process
    process.process.stop()


def token_expiring_in(stream: str, seconds: float) -> str:
    """A token the gateway treats as expiring ``seconds`` from now: its ``exp`` is back-dated by the
    leeway, so the test does not wait out the tolerated clock skew."""
    now = int(time.time())
    ttl = 1
    issued = int(now + seconds - LEEWAY_SECONDS - ttl)
    return issue_token(SECRET, [stream], ttl, now=issued)


async def close_after_hello(url: str, token: str, timeout: float) -> tuple[list[str], int | None, float]:
    """Frame types received (an error frame as ``error <code>``), the close code and how long after the
    hello it came."""
    types: list[str] = []
    async with connect(url, open_timeout=5) as ws:
        started = time.monotonic()
        await ws.send(json.dumps({"type": "hello", "v": 1, "token": token}))
        try:
            async with asyncio.timeout(timeout):
                while True:
                    frame = json.loads(await ws.recv())
                    types.append(f"error {frame['code']}" if frame["type"] == "error" else frame["type"])
        except ConnectionClosed as closed:
            return types, (closed.rcvd.code if closed.rcvd else None), time.monotonic() - started
    return types, None, timeout


def test_a_token_expiring_while_connected_closes_with_4419(secured: GatewayProcess, unique_name: str) -> None:
    types, code, after = asyncio.run(close_after_hello(secured.ws(unique_name), token_expiring_in(unique_name, 2),
                                                       timeout=10))
    # Resumable, and the client's doing: the error frame says why, just before the close.
    assert types[0] == "welcome" and types[-1] == "error 4419" and types.count("error 4419") == 1, types
    assert code == 4419
    assert 1.0 < after < 5.0


def test_an_expired_token_at_the_hello_closes_with_4419(secured: GatewayProcess, unique_name: str) -> None:
    types, code, _ = asyncio.run(close_after_hello(secured.ws(unique_name), token_expiring_in(unique_name, -30),
                                                   timeout=5))
    assert (types, code) == (["error 4419"], 4419)


def test_a_client_with_a_refresh_hook_resumes_exactly_once(secured: GatewayProcess, unique_name: str,
                                                          redis: redis_lib.Redis) -> None:
    committer = Committer(redis, unique_name, per_batch=3, interval=0.05).start()
    refreshed: list[float] = []

    async def refresh() -> str:
        refreshed.append(time.monotonic())
        return token_expiring_in(unique_name, 1.5)

    async def run() -> StreamClient:
        client = StreamClient(secured.ws(unique_name), token=token_expiring_in(unique_name, 1.5), keep_applied=True,
                              refresh_token=refresh)
        task = asyncio.create_task(client.run())
        await client.wait_until(lambda: len(refreshed) >= 3, timeout=30)
        await stop_at_head(client, task, committer, redis)
        return client

    try:
        client = asyncio.run(run())
    finally:
        committer.stop()
    stats = client.stats()
    assert stats.closes.get(4419, 0) >= 3 and stats.terminal is None
    seqs = [seq for seq, _ in client.applied]
    assert seqs == list(range(seqs[0], seqs[-1] + 1)) and seqs[-1] == committer.committed
    assert (stats.duplicates, stats.gaps) == (0, 0)
    assert set(stats.resets) <= {"no_position"}  # only the first connection had no position


def test_a_client_without_a_refresh_hook_stops_on_4419(secured: GatewayProcess, unique_name: str) -> None:
    async def run() -> StreamClient:
        client = StreamClient(secured.ws(unique_name), token=token_expiring_in(unique_name, 1))
        with pytest.raises(TerminalClose) as raised:
            async with asyncio.timeout(15):
                await client.run()
        assert raised.value.code == 4419
        return client

    assert asyncio.run(run()).stats().closes == {4419: 1}
