"""Text frames that are not UTF-8 close their connections 1007 and are counted, but the log gets one line
per interval, not a traceback per frame (issue 39: uvicorn logged one for each, so a client could flood a
pod's log). uvicorn with sparkwire's protocol in this process, so its log records can be read; the bad
frame as a client's first frame (before its hello: uvicorn's queue path) and after its hello (the
connection's listener path)."""

from __future__ import annotations

import asyncio
import json
import logging

import pytest
import uvicorn
from prometheus_client import REGISTRY
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed
from websockets.frames import Frame, Opcode

from sparkwire.gateway.app import create_app
from sparkwire.gateway.pod import Gateway
from sparkwire.gateway.settings import ConnectionSettings
from sparkwire.gateway.store.session_store import SessionStore
from sparkwire.gateway.transport.bad_input import BAD_INPUT_LOG
from sparkwire.gateway.transport.uvicorn_http import SparkwireHttpProtocol
from sparkwire.gateway.transport.uvicorn_websocket import SparkwireWebSocketProtocol
from sparkwire.replaylog.memory import MemoryBackend
from sparkwire_harness.stack import free_port

pytestmark = pytest.mark.timeout(60)

STREAM = "metrics"
CONNECTIONS = 20  # each way
NOT_UTF8 = Frame(Opcode.TEXT, b'{"type":"hello","v":1,"x":"\xff\xfe"}').serialize(mask=True)


def bad_input_counted() -> float:
    return REGISTRY.get_sample_value("sparkwire_gateway_bad_input_total", {"kind": "invalid_utf8"}) or 0.0


class Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


async def close_code_after_bad_frame(url: str, *, after_hello: bool) -> int | None:
    ws: ClientConnection = await connect(url, open_timeout=5)
    if after_hello:
        await ws.send(json.dumps({"type": "hello", "v": 1}))
        assert json.loads(await ws.recv())["type"] == "welcome"
    ws.transport.write(NOT_UTF8)  # the client library refuses to send one itself
    try:
        async with asyncio.timeout(5):
            while True:
                await ws.recv()
    except ConnectionClosed as closed:
        return closed.rcvd.code if closed.rcvd else None


async def run_gateway_and_send_bad_frames(port: int) -> list[int | None]:
    backend = MemoryBackend()
    settings = ConnectionSettings(ack_every=10, ack_interval_ms=1000, hello_timeout_s=5, max_client_frame_bytes=8192,
                                  max_server_frame_bytes=1 << 20, page_size=50, auth_secret="")
    gateway = Gateway(backend=backend, streams=[STREAM], connection=settings,
                      sessions=SessionStore(backend.sessions, ttl_seconds=60, pod="in-process"),
                      allowed_origins=frozenset(), ring_size=100, send_queue=256)
    config = uvicorn.Config(create_app(gateway), host="127.0.0.1", port=port, ws=SparkwireWebSocketProtocol,
                            http=SparkwireHttpProtocol, lifespan="on", log_level="warning", proxy_headers=False)
    server = uvicorn.Server(config)
    serving = asyncio.create_task(server.serve())
    while not server.started:
        await asyncio.sleep(0.01)
    url = f"ws://127.0.0.1:{port}/ws?stream={STREAM}"
    try:
        return list(await asyncio.gather(*(close_code_after_bad_frame(url, after_hello=n % 2 == 1)
                                            for n in range(2 * CONNECTIONS))))
    finally:
        server.should_exit = True
        await serving


def test_frames_that_are_not_utf8_are_closed_1007_counted_and_logged_once_per_interval() -> None:
    records = Records()
    watched = [logging.getLogger(name) for name in ("uvicorn", "uvicorn.error", "sparkwire")]
    for logger in watched:
        logger.addHandler(records)
    counted = bad_input_counted()
    BAD_INPUT_LOG._logged_at.clear()  # a line is due for the first one, whatever ran before
    try:
        codes = asyncio.run(run_gateway_and_send_bad_frames(free_port()))
    finally:
        for logger in watched:
            logger.removeHandler(records)
    assert codes == [1007] * (2 * CONNECTIONS)
    assert bad_input_counted() - counted == 2 * CONNECTIONS
    assert not [record for record in records.records if record.exc_info], "a traceback was logged"
    about_it = {record.getMessage() for record in records.records if "invalid_utf8" in record.getMessage()}
    assert len(about_it) == 1, about_it
