"""The pod protects itself where no ingress does (issue 39): a connection whose request headers do not
complete in ``--header-timeout-ms`` is closed, whether it sends nothing or a byte now and then (slowloris;
uvicorn has no such timeout of its own), and past ``--max-connections`` a WebSocket upgrade or an HTTP request
gets 503, but not the probes. A real gateway process."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from sparkwire_harness.stack import GatewayProcess, RedisServer, http_status

pytestmark = pytest.mark.timeout(60)

HEADER_TIMEOUT_MS = 500
MAX_CONNECTIONS = 6
UPGRADE = (b"GET /ws?stream=%s HTTP/1.1\r\nHost: gateway\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
           b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n")


async def seconds_until_closed(port: int, trickle: bytes) -> float:
    """Open a connection that sends ``trickle`` a byte every 0.1 s (nothing when empty): how long until the
    server closed it (fails after 5 s)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    opened = time.monotonic()

    async def dribble() -> None:
        for byte in trickle:
            writer.write(bytes([byte]))
            await asyncio.sleep(0.1)

    dribbling = asyncio.create_task(dribble())
    try:
        async with asyncio.timeout(5):
            assert await reader.read() == b""  # closed by the server, nothing answered
        return time.monotonic() - opened
    finally:
        dribbling.cancel()
        writer.close()


async def upgrade_status(port: int, stream: str) -> tuple[int, asyncio.StreamWriter]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(UPGRADE % stream.encode())
    status_line = await asyncio.wait_for(reader.readline(), 5)
    return int(status_line.split()[1]), writer


@pytest.fixture
def limited_gateway(redis_server: RedisServer, unique_name: str, tmp_path: Path) -> Iterator[GatewayProcess]:
    gateway = GatewayProcess(tmp_path, redis_server.url, [unique_name], "--header-timeout-ms", str(HEADER_TIMEOUT_MS),
                             "--max-connections", str(MAX_CONNECTIONS), "--hello-timeout-ms", "20000").start()
    yield gateway
    gateway.stop()


def test_a_connection_without_complete_headers_in_time_is_closed(limited_gateway: GatewayProcess,
                                                                 unique_name: str) -> None:
    partial_request = b"GET /ws?stream=" + unique_name.encode() + b" HTTP/1.1\r\nHost: gateway\r\nX-Slow: " + b"a" * 40

    async def run() -> list[float]:
        return list(await asyncio.gather(seconds_until_closed(limited_gateway.port, b""),
                                         seconds_until_closed(limited_gateway.port, partial_request)))

    silent, slowloris = asyncio.run(run())
    limit = HEADER_TIMEOUT_MS / 1000
    assert limit * 0.8 < silent < limit + 1.5
    assert limit * 0.8 < slowloris < limit + 1.5  # the bytes it keeps sending do not push the deadline back
    assert limited_gateway.metric('sparkwire_gateway_bad_input_total{kind="header_timeout"}') == 2


def test_past_the_connection_cap_an_upgrade_gets_503_until_a_connection_ends(limited_gateway: GatewayProcess,
                                                                             unique_name: str) -> None:
    async def run() -> tuple[list[int], int, int]:
        held = [await upgrade_status(limited_gateway.port, unique_name) for _ in range(MAX_CONNECTIONS - 1)]
        over, over_writer = await upgrade_status(limited_gateway.port, unique_name)
        over_writer.close()
        # At the cap, other requests get 503 too, but never the probes: a liveness probe answered 503 would
        # restart the pod and drop every client it holds.
        statuses = await asyncio.to_thread(lambda: [http_status(f"{limited_gateway.http}{path}")
                                                    for path in ("/streams", "/healthz", "/readyz", "/metrics")])
        assert statuses == [503, 200, 200, 200]
        held[0][1].close()  # one client leaves
        await asyncio.sleep(0.3)
        again, again_writer = await upgrade_status(limited_gateway.port, unique_name)
        for _, writer in [*held, (again, again_writer)]:
            writer.close()
        return [status for status, _ in held], over, again

    held, over, again = asyncio.run(run())
    assert held == [101] * (MAX_CONNECTIONS - 1)
    assert over == 503
    assert again == 101
    time.sleep(0.3)
    assert limited_gateway.metric('sparkwire_gateway_refused_connections_total{reason="max_connections"}') == 2
