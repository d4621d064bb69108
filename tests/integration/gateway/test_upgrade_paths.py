"""Every way into a WebSocket on a real gateway process: a plain upgrade opened from the front door's one read
of its head (``transport.front_door``), an upgrade after an HTTP request on a kept-alive connection answered
from uvicorn's parse (``transport.upgrade``), and anything else (a subprotocol asked for, a malformed request)
through websockets as before; a refused upgrade costs nobody else their connection."""

from __future__ import annotations

import asyncio
import json

import pytest
from websockets.asyncio.client import connect

from sparkwire_harness.stack import GatewayProcess

pytestmark = pytest.mark.timeout(60)

KEY = b"dGhlIHNhbXBsZSBub25jZQ=="  # RFC 6455 1.3: its accept value is s3pPLMBiTxaQ9kYGzzhZRbK+xOo=


def upgrade(stream: str, key: bytes = KEY, version: bytes = b"13") -> bytes:
    return (b"GET /ws?stream=" + stream.encode() + b" HTTP/1.1\r\nHost: gateway\r\nUpgrade: websocket\r\n"
            b"Connection: Upgrade\r\nSec-WebSocket-Key: " + key + b"\r\n"
            b"Sec-WebSocket-Version: " + version + b"\r\n\r\n")


async def answer(port: int, request: bytes) -> tuple[int, dict[str, str]]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(request)
        head = (await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)).decode("latin-1").split("\r\n")
        headers = dict(line.split(": ", 1) for line in head[1:] if line)
        return int(head[0].split()[1]), {name.lower(): value for name, value in headers.items()}
    finally:
        writer.close()


async def welcome(url: str, **options: object) -> dict[str, object]:
    async with connect(url, open_timeout=5, **options) as ws:  # type: ignore[arg-type]
        await ws.send(json.dumps({"type": "hello", "v": 1}))
        frame: dict[str, object] = json.loads(await asyncio.wait_for(ws.recv(), 5))
        return frame


def test_a_plain_upgrade_gets_websockets_answer_and_a_session(gateway: GatewayProcess, unique_name: str) -> None:
    status, headers = asyncio.run(answer(gateway.port, upgrade(unique_name)))
    assert status == 101
    assert headers["sec-websocket-accept"] == "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="
    assert headers["upgrade"] == "websocket" and headers["connection"] == "Upgrade"
    assert "date" in headers and headers["server"] == "uvicorn"  # uvicorn's default headers, as on its own path
    assert asyncio.run(welcome(gateway.ws(unique_name)))["type"] == "welcome"


def test_an_upgrade_asking_for_a_subprotocol_goes_websockets_way_and_is_served(gateway: GatewayProcess,
                                                                             unique_name: str) -> None:
    frame = asyncio.run(welcome(gateway.ws(unique_name), subprotocols=["chat"]))
    assert frame["type"] == "welcome"


@pytest.mark.parametrize(("key", "version", "status"), [(b"c2hvcnQ=", b"13", 400), (KEY, b"8", 400)])
def test_a_malformed_upgrade_is_refused_by_websockets_and_the_next_is_served(
        gateway: GatewayProcess, unique_name: str, key: bytes, version: bytes, status: int) -> None:
    assert asyncio.run(answer(gateway.port, upgrade(unique_name, key, version)))[0] == status
    assert asyncio.run(answer(gateway.port, upgrade(unique_name)))[0] == 101
    assert asyncio.run(welcome(gateway.ws(unique_name)))["type"] == "welcome"


async def hello_after(port: int, stream: str, before: bytes, pieces: int) -> tuple[bytes, dict[str, object]]:
    """Send ``before`` then an upgrade in ``pieces`` writes on one connection: what came back before the 101,
    and the first frame after a hello."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        earlier = b""
        if before:
            writer.write(before)
            earlier = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
            length = next(int(line.split(b":")[1]) for line in earlier.split(b"\r\n")
                          if line.lower().startswith(b"content-length:"))
            earlier += await asyncio.wait_for(reader.readexactly(length), 5)
        request = upgrade(stream)
        step = -(-len(request) // pieces)
        for start in range(0, len(request), step):
            writer.write(request[start:start + step])
            await writer.drain()
            await asyncio.sleep(0.02)
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
        assert head.startswith(b"HTTP/1.1 101 ")
        hello = json.dumps({"type": "hello", "v": 1}).encode()
        writer.write(b"\x81" + bytes([0x80 | len(hello)]) + b"\0\0\0\0" + hello)  # masked with a zero key
        first = await asyncio.wait_for(reader.readexactly(2), 5)
        length = first[1] & 0x7F
        if length == 126:
            length = int.from_bytes(await reader.readexactly(2), "big")
        frame: dict[str, object] = json.loads(await asyncio.wait_for(reader.readexactly(length), 5))
        return earlier, frame
    finally:
        writer.close()


def test_an_upgrade_in_pieces_is_served(gateway: GatewayProcess, unique_name: str) -> None:
    _, frame = asyncio.run(hello_after(gateway.port, unique_name, b"", pieces=9))
    assert frame["type"] == "welcome"


def test_an_upgrade_after_an_http_request_on_the_same_connection_is_served(gateway: GatewayProcess,
                                                                            unique_name: str) -> None:
    probe = b"GET /healthz HTTP/1.1\r\nHost: gateway\r\n\r\n"
    earlier, frame = asyncio.run(hello_after(gateway.port, unique_name, probe, pieces=1))
    assert earlier.startswith(b"HTTP/1.1 200 ")
    assert frame["type"] == "welcome"
