"""A lane's write straight to its socket (``contract.write_direct``) and which sockets a lane may write to
(``wire.socket_fd``), on real socket pairs: the bytes arrive whole and in order whatever the socket takes."""

from __future__ import annotations

import asyncio
import socket
import ssl
from collections.abc import Iterator
from typing import Any

import pytest

from sparkwire.gateway.transport.contract import write_direct
from sparkwire.gateway.transport.wire import socket_fd


class Transport:
    """A transport's write buffer: what ``write_direct`` hands it, and what it holds unsent."""

    def __init__(self, buffered: int = 0) -> None:
        self.written: list[bytes] = []
        self.buffered = buffered

    def write(self, data: bytes) -> None:
        self.written.append(bytes(data))

    def is_closing(self) -> bool:
        return False

    def get_write_buffer_size(self) -> int:
        return self.buffered


@pytest.fixture
def pair() -> Iterator[tuple[socket.socket, socket.socket]]:
    ours, theirs = socket.socketpair()
    ours.setblocking(False)
    theirs.setblocking(False)
    yield ours, theirs
    ours.close()
    theirs.close()


def drain(sock: socket.socket) -> bytes:
    chunks = []
    while True:
        try:
            chunk = sock.recv(1 << 20)
        except BlockingIOError:
            return b"".join(chunks)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)


def test_an_empty_transport_lets_the_socket_take_the_bytes(pair: tuple[socket.socket, socket.socket]) -> None:
    ours, theirs = pair
    transport = Transport()
    write_direct(transport, ours.fileno(), b"frame-1")
    write_direct(transport, ours.fileno(), b"frame-2")
    assert drain(theirs) == b"frame-1frame-2" and transport.written == []


def test_bytes_behind_unsent_ones_go_to_the_transport(pair: tuple[socket.socket, socket.socket]) -> None:
    """Written to the socket they would overtake what the transport holds: they queue behind it instead."""
    ours, theirs = pair
    transport = Transport(buffered=10)
    write_direct(transport, ours.fileno(), b"later")
    assert drain(theirs) == b"" and transport.written == [b"later"]


def test_what_a_full_socket_does_not_take_follows_in_the_transport(pair: tuple[socket.socket, socket.socket]) -> None:
    ours, theirs = pair
    ours.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    transport = Transport()
    data = bytes(range(256)) * 4096  # 1 MiB: more than the socket holds
    write_direct(transport, ours.fileno(), data)
    taken = drain(theirs)
    assert 0 < len(taken) < len(data) and taken + b"".join(transport.written) == data
    transport.buffered = len(data) - len(taken)
    write_direct(transport, ours.fileno(), b"next")  # the rest is still unsent: this one waits behind it
    assert transport.written[-1] == b"next" and drain(theirs) == b""


def test_a_socket_that_takes_nothing_leaves_everything_to_the_transport(
        pair: tuple[socket.socket, socket.socket]) -> None:
    ours, _ = pair
    ours.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    while True:  # fill it
        try:
            ours.send(b"x" * 65536)
        except BlockingIOError:
            break
    transport = Transport()
    write_direct(transport, ours.fileno(), b"frame")
    assert transport.written == [b"frame"]


def test_an_error_is_left_to_the_transport_to_meet(pair: tuple[socket.socket, socket.socket]) -> None:
    """A peer gone: the socket refuses (EPIPE), and the transport gets the bytes, hits the same error on its
    own write and closes the connection as it does for any write."""
    ours, theirs = pair
    theirs.close()
    transport = Transport()
    write_direct(transport, ours.fileno(), b"frame")
    assert transport.written == [b"frame"]


def test_no_socket_means_the_transport_writes() -> None:
    transport = Transport()
    write_direct(transport, -1, b"frame")
    assert transport.written == [b"frame"]


class Extra:
    def __init__(self, **info: Any) -> None:
        self.info = info

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return self.info.get(name, default)


def test_a_lane_writes_to_plain_sockets_only(pair: tuple[socket.socket, socket.socket]) -> None:
    ours, _ = pair
    assert socket_fd(Extra(socket=ours)) == ours.fileno()  # type: ignore[arg-type]
    # TLS: the socket's bytes are the TLS records, not the frames
    assert socket_fd(Extra(socket=ours, sslcontext=ssl.create_default_context())) == -1  # type: ignore[arg-type]
    assert socket_fd(Extra()) == -1  # type: ignore[arg-type]


FRAMES = 30_000  # 18 MB: more than loopback's socket buffers hold while the reader pauses


def test_a_uvloop_connections_lane_has_its_socket_and_the_bytes_arrive_in_order() -> None:
    """On the event loop the gateway runs (uvloop): direct writes and transport writes interleaved as a
    slow reader makes them, every byte in order."""
    uvloop = pytest.importorskip("uvloop")

    async def scenario() -> bytes:
        received = bytearray()
        done = asyncio.Event()
        transports: list[asyncio.Transport] = []

        class Server(asyncio.Protocol):
            def connection_made(self, transport: asyncio.BaseTransport) -> None:
                transports.append(transport)  # type: ignore[arg-type]

        class Client(asyncio.Protocol):
            def data_received(self, data: bytes) -> None:
                received.extend(data)
                if len(received) >= expected:
                    done.set()

        loop = asyncio.get_running_loop()
        server = await loop.create_server(Server, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        client, _ = await loop.create_connection(Client, "127.0.0.1", port)
        while not transports:
            await asyncio.sleep(0.01)
        transport = transports[0]
        fd = socket_fd(transport)
        assert fd >= 0
        client.pause_reading()  # the socket fills; later frames queue in the transport
        for n in range(FRAMES):
            write_direct(transport, fd, f"{n:06d}".encode() * 100)
        assert transport.get_write_buffer_size() > 0  # some went through the transport's buffer
        client.resume_reading()
        await asyncio.wait_for(done.wait(), 10)
        client.close()
        server.close()
        return bytes(received)

    expected = FRAMES * 600
    received = uvloop.run(scenario())
    assert received == b"".join(f"{n:06d}".encode() * 100 for n in range(FRAMES))


def test_a_wire_writes_to_its_socket_while_its_transport_holds_nothing(
        pair: tuple[socket.socket, socket.socket]) -> None:
    """The connection's own writes through the hub (``Wire.write``) take the same direct path."""
    from types import SimpleNamespace
    from typing import cast

    from sparkwire.gateway.transport.wire import Wire, Writable

    ours, theirs = pair

    class SocketTransport(Transport):
        def get_extra_info(self, name: str, default: Any = None) -> Any:
            return ours if name == "socket" else default

    transport = SocketTransport()
    protocol = SimpleNamespace(transport=transport, close_sent=False, disconnected=False, handshake_complete=True,
                               writable=Writable(), conn=SimpleNamespace(extensions=[]))
    wire = Wire(cast(Any, protocol))
    assert wire.write(b"batch-1")
    transport.buffered = 5
    assert wire.write(b"batch-2")
    assert drain(theirs) == b"batch-1" and transport.written == [b"batch-2"]
