"""The front door reads a request head once: a plain upgrade's target and headers as uvicorn's httptools
protocol would have them, anything else left to uvicorn unread, with the rest of the header deadline."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import httptools
import pytest
import uvicorn
from uvicorn.server import ServerState

from sparkwire.gateway.transport.front_door import MAX_HEAD_BYTES, FrontDoor, parse_plain_get
from sparkwire.gateway.transport.uvicorn_http import SparkwireHttpProtocol
from sparkwire.gateway.transport.uvicorn_websocket import SparkwireWebSocketProtocol

BROWSER = (b"GET /ws?stream=orders&x=%20y HTTP/1.1\r\nHost: gw.example:8000\r\nUser-Agent: Mozilla/5.0 (X11; Linux "
           b"x86_64) Chrome/131.0\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nOrigin: https://app.example\r\n"
           b"Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
           b"Cookie: a=1; b=\xc3\xa9t\xc3\xa9\r\nX-Spaced:   padded value \t\r\nX-Empty:\r\n"
           b"Sec-WebSocket-Extensions: permessage-deflate; client_max_window_bits")
CLIENT_LIBRARY = (b"GET / HTTP/1.1\r\nhost: 127.0.0.1\r\nupgrade: websocket\r\nconnection: keep-alive, Upgrade\r\n"
                  b"sec-websocket-key: AAAAAAAAAAAAAAAAAAAAAA==\r\nsec-websocket-version: 13")


class HttptoolsHead:
    """What uvicorn's httptools protocol keeps of a request: the URL and the headers, names lower-cased."""

    def __init__(self, request: bytes) -> None:
        self.url = b""
        self.headers: list[tuple[bytes, bytes]] = []
        parser = httptools.HttpRequestParser(self)
        with contextlib.suppress(httptools.HttpParserUpgrade):
            parser.feed_data(request)
        self.method = parser.get_method()

    def on_url(self, url: bytes) -> None:
        self.url += url

    def on_header(self, name: bytes, value: bytes) -> None:
        self.headers.append((name.lower(), value))


@pytest.mark.parametrize("head", [BROWSER, CLIENT_LIBRARY], ids=["browser", "client-library"])
def test_a_plain_get_is_read_as_uvicorns_httptools_protocol_reads_it(head: bytes) -> None:
    parsed = parse_plain_get(head)
    assert parsed is not None
    expected = HttptoolsHead(head + b"\r\n\r\n")
    assert expected.method == b"GET"
    assert parsed == (expected.url, expected.headers)


@pytest.mark.parametrize("head", [
    BROWSER.replace(b"GET ", b"POST "),
    BROWSER.replace(b"HTTP/1.1", b"HTTP/1.0"),
    BROWSER.replace(b"GET /ws", b"GET http://gw.example/ws"),  # absolute form
    BROWSER.replace(b"GET /ws", b"GET  /ws"),
    BROWSER.replace(b"stream=orders", b"stream=or\x7fders"),
    BROWSER.replace(b"\r\nOrigin:", b"\r\n Origin:"),  # a folded line
    BROWSER.replace(b"Origin:", b"Origin :"),
    BROWSER.replace(b"Origin:", b"Origin"),
    BROWSER.replace(b"app.example", b"app\x00example"),
    BROWSER.replace(b"app.example", b"app\rexample"),
    BROWSER.replace(b"\r\nOrigin", b"\nOrigin"),  # a bare LF
    BROWSER + b"\r\nContent-Length: 5",
    BROWSER + b"\r\nTransfer-Encoding: chunked",
    BROWSER + b"\r\nX-Many: 1" * 64,
    b"",
])
def test_anything_but_a_plain_get_is_left_to_uvicorn(head: bytes) -> None:
    assert parse_plain_get(head) is None


class FakeTransport:
    """What the front door and uvicorn's HTTP protocol call on a transport (pure logic under test)."""

    def __init__(self) -> None:
        self.protocol: Any = None
        self.written = b""
        self.closed = False

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {"sockname": ("127.0.0.1", 8000), "peername": ("127.0.0.1", 50000)}.get(name, default)

    def set_protocol(self, protocol: Any) -> None:
        self.protocol = protocol

    def write(self, data: bytes) -> None:
        self.written += data

    def close(self) -> None:
        self.closed = True

    def is_closing(self) -> bool:
        return self.closed

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass


def door(loop: asyncio.AbstractEventLoop, header_timeout_s: float = 10.0,
         max_connections: int | None = None) -> tuple[FrontDoor, FakeTransport, ServerState]:
    asyncio.set_event_loop(loop)  # what uvicorn's protocols take when not given one (the server's running loop)
    config = uvicorn.Config(app=lambda scope, receive, send: None, ws=SparkwireWebSocketProtocol)
    state = ServerState()
    protocol = FrontDoor.configured(header_timeout_s, max_connections)(config, state, {}, _loop=loop)
    transport = FakeTransport()
    protocol.connection_made(transport)  # type: ignore[arg-type]
    return protocol, transport, state


def finish(loop: asyncio.AbstractEventLoop, state: ServerState) -> None:
    """Cancel the application tasks the protocols started (no application runs here) and close the loop."""
    for task in state.tasks:
        task.cancel()
    loop.run_until_complete(asyncio.gather(*state.tasks, return_exceptions=True))
    asyncio.set_event_loop(None)
    loop.close()


def test_a_plain_upgrade_read_in_pieces_is_opened_on_the_websocket_protocol_and_its_deadline_dropped() -> None:
    loop = asyncio.new_event_loop()
    protocol, transport, state = door(loop)
    request = CLIENT_LIBRARY + b"\r\n\r\n"
    for start in range(0, len(request), 7):
        protocol.data_received(request[start:start + 7])
    assert isinstance(transport.protocol, SparkwireWebSocketProtocol)
    assert transport.protocol.scope["path"] == "/" and transport.protocol.scope["client"] == ("127.0.0.1", 50000)
    assert state.connections == {transport.protocol} and protocol.deadline is None
    finish(loop, state)


@pytest.mark.parametrize(("request_bytes", "still_reading_headers"), [
    (b"GET /healthz HTTP/1.1\r\nHost: gw\r\n\r\n", False),
    (b"GET /ws HTTP/1.1\r\nX-Big: " + b"a" * MAX_HEAD_BYTES, True),  # no end of head in sight
], ids=["http-request", "long-head"])
def test_anything_else_goes_to_uvicorns_protocol_with_what_was_read_and_the_rest_of_the_deadline(
        request_bytes: bytes, still_reading_headers: bool) -> None:
    loop = asyncio.new_event_loop()
    protocol, transport, state = door(loop, header_timeout_s=10.0)
    assert protocol.deadline is not None
    deadline = protocol.deadline.when()
    loop.run_until_complete(asyncio.sleep(0.2))
    protocol.data_received(request_bytes)
    http = transport.protocol
    assert isinstance(http, SparkwireHttpProtocol)
    assert state.connections == {http} and protocol.deadline is None
    assert http.url == request_bytes.split(b" ")[1]  # uvicorn parsed what the front door had read
    if still_reading_headers:  # the same deadline, not a new one
        assert http._header_deadline is not None
        assert http._header_deadline.when() == pytest.approx(deadline, abs=0.05)
    else:
        assert http._header_deadline is None
    finish(loop, state)


def test_an_upgrade_with_bytes_after_its_head_is_uvicorns_to_open(monkeypatch: pytest.MonkeyPatch) -> None:
    loop = asyncio.new_event_loop()
    protocol, transport, state = door(loop)
    handed: list[bytes] = []
    original = SparkwireHttpProtocol.data_received

    def record(self: SparkwireHttpProtocol, data: bytes) -> None:
        handed.append(data)
        original(self, data)

    monkeypatch.setattr(SparkwireHttpProtocol, "data_received", record)
    protocol.data_received(CLIENT_LIBRARY + b"\r\n\r\n\x81\x05hello")
    assert handed == [CLIENT_LIBRARY + b"\r\n\r\n\x81\x05hello"]
    assert isinstance(transport.protocol, SparkwireWebSocketProtocol)  # uvicorn's path opens it, as before
    finish(loop, state)


def test_past_the_cap_an_upgrade_gets_503_and_is_closed() -> None:
    loop = asyncio.new_event_loop()
    protocol, transport, _state = door(loop, max_connections=1)
    protocol.data_received(CLIENT_LIBRARY + b"\r\n\r\n")
    assert transport.written.startswith(b"HTTP/1.1 503 ") and transport.closed and transport.protocol is None
    finish(loop, _state)


def test_headers_not_complete_in_time_close_the_connection() -> None:
    loop = asyncio.new_event_loop()
    protocol, transport, state = door(loop, header_timeout_s=0.01)
    protocol.data_received(b"GET /ws HTTP/1.1\r\nHost:")
    loop.run_until_complete(asyncio.sleep(0.05))
    assert transport.closed and transport.protocol is None
    protocol.connection_lost(None)
    assert not state.connections
    finish(loop, state)
