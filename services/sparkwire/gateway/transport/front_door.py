"""A pod's connections before they are HTTP or WebSocket: the request head read once, a plain WebSocket
upgrade handed straight to the WebSocket protocol, anything else handed to uvicorn's HTTP protocol with the
bytes it sent.

uvicorn builds its HTTP protocol for every connection, upgrades included: two ``getLogger`` calls, a flow
control object, an httptools parser whose Python callbacks run once per header, the local and remote
address read through a socket object made for it (three system calls on top of the ones uvloop already made),
and the upgrade checked four times. For a WebSocket client all of that lives for the time of one request.
With thousands of clients connecting at once it was about a tenth of a handshake's CPU
(``bench/handshake_cpu.py``; docs/design-notes.md, "A handshake parsed once").

The front door takes a strict subset: ``GET <origin-form target> HTTP/1.1``, header lines of a token, a colon
and a value of visible characters, no body, nothing sent after the head. Whatever is not that (another
method or version, a folded or malformed line, a body, a pipelined request, a head past ``MAX_HEAD_BYTES``)
goes to uvicorn unread, as if the front door were not there, and is answered as before; so this path never
takes a request uvicorn would answer otherwise. The deadline for request headers (slowloris) runs from the
connection, here and on after a hand-over; the connection cap applies to the upgrades it takes.
"""

from __future__ import annotations

import asyncio
import re
from typing import Any

from uvicorn.config import Config
from uvicorn.server import ServerState

from sparkwire.gateway.transport.upgrade import plain_upgrade
from sparkwire.gateway.transport.uvicorn_http import SparkwireHttpProtocol, close_headers_too_late, refuse_over_limit
from sparkwire.gateway.transport.uvicorn_websocket import SparkwireWebSocketProtocol

# A browser's upgrade is 400-700 bytes (cookies can make it longer); a head not complete by this many bytes
# goes to uvicorn, whose parser has the limits and the answers for it.
MAX_HEAD_BYTES = 8192
MAX_HEADER_LINES = 64

# The whole head, in one match: ``GET``, an origin-form target of visible ASCII (RFC 9112 3.2.1), HTTP/1.1,
# then lines of a token (RFC 9110 5.6.2), a colon and a value without control characters but tab. A folded
# line (starting with a space) or a bare CR or LF does not match.
_PLAIN_GET = re.compile(rb"GET /[\x21-\x7e]* HTTP/1\.1(?:\r\n[!#$%&'*+\-.^_`|~0-9A-Za-z]+:[\t\x20-\x7e\x80-\xff]*)*")
# A body or a framing this path does not read: uvicorn's way.
_BODY_HEADERS = frozenset({b"content-length", b"transfer-encoding"})


def parse_plain_get(head: bytes) -> tuple[bytes, list[tuple[bytes, bytes]]] | None:
    """The target and the headers (names lower-cased, values without leading spaces and tabs, as uvicorn's
    httptools protocol keeps them) of a request head (up to, not including, the blank line) that is a plain
    HTTP/1.1 GET without a body; None for anything else."""
    if _PLAIN_GET.fullmatch(head) is None:
        return None
    lines = head.split(b"\r\n")
    if len(lines) > MAX_HEADER_LINES + 1:
        return None
    headers: list[tuple[bytes, bytes]] = []
    for line in lines[1:]:
        name, _, value = line.partition(b":")
        name = name.lower()
        if name in _BODY_HEADERS:
            return None
        headers.append((name, value.lstrip(b" \t")))
    return lines[0][4:-9], headers


class FrontDoor(asyncio.Protocol):
    """The protocol uvicorn makes for every connection (``uvicorn.Config(http=FrontDoor.configured(...))``):
    it reads the request head, opens a plain upgrade on ``SparkwireWebSocketProtocol`` and hands anything else
    to ``http_protocol`` (``SparkwireHttpProtocol``) with what it read."""

    header_timeout_s: float = 10.0
    max_connections: int | None = None
    http_protocol: type[SparkwireHttpProtocol] = SparkwireHttpProtocol

    @classmethod
    def configured(cls, header_timeout_s: float, max_connections: int | None) -> type[FrontDoor]:
        """This protocol, and the HTTP protocol it hands over to, with the pod's limits (uvicorn constructs it
        with uvicorn's arguments only)."""
        http = SparkwireHttpProtocol.configured(header_timeout_s=header_timeout_s, max_connections=max_connections)
        return type(cls.__name__, (cls,), {"header_timeout_s": header_timeout_s, "max_connections": max_connections,
                                           "http_protocol": http})

    def __init__(self, config: Config, server_state: ServerState, app_state: dict[str, Any],
                 _loop: asyncio.AbstractEventLoop | None = None) -> None:
        if not config.loaded:
            config.load()
        self.config = config
        self.server_state = server_state
        self.app_state = app_state
        self.loop = _loop or asyncio.get_event_loop()
        self.connections = server_state.connections
        self.transport: asyncio.Transport | None = None
        self.head = b""
        self.deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        self.connections.add(self)  # type: ignore[arg-type]  # uvicorn calls ``shutdown`` on each
        self.transport = transport
        self.deadline = self.loop.call_later(self.header_timeout_s, self._headers_too_late)

    def connection_lost(self, exc: Exception | None) -> None:
        self.connections.discard(self)
        self._disarm()
        self.transport = None

    def shutdown(self) -> None:
        """uvicorn's shutdown: a connection still reading its first request has nothing to finish."""
        if self.transport is not None:
            self.transport.close()

    def data_received(self, data: bytes) -> None:
        transport = self.transport
        if transport is None:
            return
        head = self.head + data if self.head else data
        end = head.find(b"\r\n\r\n")
        if end < 0:
            if len(head) > MAX_HEAD_BYTES:
                self._hand_over(transport, head)
            else:
                self.head = head
            return
        self.head = b""
        request = parse_plain_get(head[:end]) if end + 4 == len(head) else None  # nothing sent after the head
        upgrade = None
        if request is not None:
            target, headers = request
            upgrade = plain_upgrade("GET", target, headers, compression=self.config.ws_per_message_deflate,
                                    root_path=self.config.root_path)
        protocol_class = self.config.ws_protocol_class
        if upgrade is None or not (isinstance(protocol_class, type)
                                   and issubclass(protocol_class, SparkwireWebSocketProtocol)):
            self._hand_over(transport, head)
            return
        self._disarm()
        if self.max_connections is not None and len(self.connections) >= self.max_connections:
            refuse_over_limit(transport)
            return
        self.connections.discard(self)
        self.transport = None
        protocol_class.opened_on(transport, upgrade, headers, _address(transport.get_extra_info("sockname")),
                                 _address(transport.get_extra_info("peername")),
                                 secure=transport.get_extra_info("sslcontext") is not None, config=self.config,
                                 server_state=self.server_state, app_state=self.app_state, loop=self.loop)

    def _hand_over(self, transport: asyncio.Transport, data: bytes) -> None:
        """uvicorn's HTTP protocol takes the connection, as if it had been there from the start, with the rest of
        the header deadline."""
        remaining = self.deadline.when() - self.loop.time() if self.deadline is not None else self.header_timeout_s
        self._disarm()
        self.connections.discard(self)
        self.transport = None
        self.head = b""
        protocol = self.http_protocol(config=self.config, server_state=self.server_state, app_state=self.app_state,
                                      _loop=self.loop)
        protocol.connection_made(transport, header_timeout_s=max(remaining, 0.0))
        transport.set_protocol(protocol)
        protocol.data_received(data)

    def _disarm(self) -> None:
        deadline, self.deadline = self.deadline, None
        if deadline is not None:
            deadline.cancel()

    def _headers_too_late(self) -> None:
        self.deadline = None
        if self.transport is not None:
            close_headers_too_late(self.transport, self.header_timeout_s)

    def pause_writing(self) -> None:  # nothing written before the hand-over
        pass

    def resume_writing(self) -> None:
        pass


def _address(address: Any) -> tuple[str, int] | None:
    """(host, port) of a socket address as uvloop gives it (IPv6's four fields too), None for a Unix socket's."""
    return (str(address[0]), int(address[1])) if isinstance(address, tuple) else None


__all__ = ["MAX_HEAD_BYTES", "FrontDoor", "parse_plain_get"]
