"""A closed connection is freed at once, by reference counting, not left to the cyclic collector: a pod whose
10,000 clients left together used to stall 1.0-1.2 s in the full collection of what they left behind
(docs/benchmarks.md). uvicorn with sparkwire's protocol, in this process so its objects can be counted; the
in-memory log; clients that leave, clients the gateway closes (for a malformed frame, and for a frame over the
size limit, which websockets keeps as an exception), and SSE connections (served and refused)."""

from __future__ import annotations

import asyncio
import gc
import json

import pytest
import uvicorn
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed
from websockets.server import ServerProtocol

from sparkwire.gateway.app import create_app
from sparkwire.gateway.connection.lifecycle import Connection
from sparkwire.gateway.connection.sender import Sender
from sparkwire.gateway.pod import Gateway
from sparkwire.gateway.settings import ConnectionSettings
from sparkwire.gateway.store.session_store import SessionStore
from sparkwire.gateway.transport.sse import SseSocket
from sparkwire.gateway.transport.uvicorn_websocket import SparkwireWebSocketProtocol
from sparkwire.protocol.limits import MAX_CLIENT_MESSAGE_BYTES
from sparkwire.replaylog.memory import MemoryBackend
from sparkwire.replaylog.model import Record
from sparkwire_harness.stack import free_port

STREAM = "metrics"
CLIENTS = 42
SSE_CLIENTS = 10


def alive(kind: type) -> int:
    return sum(1 for obj in gc.get_objects() if type(obj) is kind)


async def sse_connection(port: int, stream: str) -> str:
    """``POST /sse`` with a hello, read the first event, leave; the event's text."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    hello = json.dumps({"type": "hello", "v": 1}).encode()
    writer.write(f"POST /sse?stream={stream} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                 f"Content-Length: {len(hello)}\r\n\r\n".encode() + hello)
    try:
        async with asyncio.timeout(5):
            received = b""
            while b"data:" not in received:
                chunk = await reader.read(4096)
                assert chunk, f"the gateway ended the response before an event: {received!r}"
                received += chunk
    finally:
        writer.close()
        await writer.wait_closed()
    return received.decode(errors="replace")


async def run_gateway_and(clients: int, port: int) -> dict[str, int]:
    backend = MemoryBackend()
    await backend.stream(STREAM).commit([Record(f"r{n}", f"k{n % 5}", json.dumps({"n": n})) for n in range(20)])
    settings = ConnectionSettings(ack_every=10, ack_interval_ms=1000, hello_timeout_s=5, max_client_frame_bytes=8192,
                                  max_server_frame_bytes=1 << 20, page_size=50, auth_secret="")
    gateway = Gateway(backend=backend, streams=[STREAM], connection=settings,
                      sessions=SessionStore(backend.sessions, ttl_seconds=60, pod="in-process"),
                      allowed_origins=frozenset(), ring_size=100, send_queue=256)
    config = uvicorn.Config(create_app(gateway), host="127.0.0.1", port=port, ws=SparkwireWebSocketProtocol,
                            ws_max_size=MAX_CLIENT_MESSAGE_BYTES, lifespan="on", log_level="warning",
                            proxy_headers=False)
    server = uvicorn.Server(config)
    serving = asyncio.create_task(server.serve())
    while not server.started:
        await asyncio.sleep(0.01)
    url = f"ws://127.0.0.1:{port}/ws?stream={STREAM}"
    try:
        sockets = [await connect(url, open_timeout=5) for _ in range(clients)]
        for ws in sockets:
            await ws.send(json.dumps({"type": "hello", "v": 1}))
        for ws in sockets:
            assert json.loads(await ws.recv())["type"] == "welcome"
            assert json.loads(await ws.recv())["type"] == "snapshot"
        connected = {"protocols": alive(SparkwireWebSocketProtocol), "connections": alive(Connection),
                     "unslotted": max(len(vars(obj)) for obj in gc.get_objects()
                                      if type(obj) is SparkwireWebSocketProtocol)}
        sse_events = [await sse_connection(port, STREAM if n % 2 else "not-served") for n in range(SSE_CLIENTS)]
        sse_served = sum('"welcome"' in text for text in sse_events)
        for index, ws in enumerate(sockets):
            if index % 3 == 0:
                await ws.close()  # the client leaves
            else:
                # The gateway closes it: a protocol violation, or a frame over the size limit (1009).
                await ws.send("{not json" if index % 3 == 1 else "x" * (MAX_CLIENT_MESSAGE_BYTES + 1))
                with pytest.raises(ConnectionClosed):
                    while True:
                        await ws.recv()
        for _ in range(100):  # until every connection's application returned
            if gateway.open_connections == 0:
                break
            await asyncio.sleep(0.02)
        await asyncio.sleep(0.1)
        return {**connected, "left_protocols": alive(SparkwireWebSocketProtocol), "left_connections": alive(Connection),
                "left_senders": alive(Sender), "left_websockets": alive(ServerProtocol),
                "left_sse_sockets": alive(SseSocket), "sse_served": sse_served, "open": gateway.open_connections}
    finally:
        server.should_exit = True
        await serving


@pytest.mark.usefixtures("collector_off")
def test_closed_connections_are_freed_without_the_cyclic_collector() -> None:
    counts = asyncio.run(run_gateway_and(CLIENTS, free_port()))
    assert counts["protocols"] == CLIENTS and counts["connections"] == CLIENTS  # what the test watches exists
    assert counts["open"] == 0
    # Every attribute of an open connection's protocol is a slot: no instance dict, 1.6 KB of each idle
    # connection (wire.py); a uvicorn upgrade that adds attributes shows here.
    assert counts["unslotted"] == 0
    assert counts["sse_served"] == SSE_CLIENTS // 2  # half were refused: a stream this pod does not serve
    assert (counts["left_protocols"], counts["left_connections"], counts["left_senders"]) == (0, 0, 0)
    # websockets' own connection (a refused frame's exception held it) and the SSE sockets (their pong sender
    # held them): issue 39's abuse benchmark showed both left to full collections under churn.
    assert (counts["left_websockets"], counts["left_sse_sockets"]) == (0, 0)
