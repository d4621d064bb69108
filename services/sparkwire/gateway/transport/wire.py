"""A uvicorn connection's direct path: the ``Wire`` (its ``Transport``) and the ``Writable`` flag that is
also its lane's gate.

Server-to-client frames are not masked, so without compression a frame's bytes do not depend on the
connection: the hub serializes a batch once and ``Wire.write`` puts those bytes on every caught-up
connection's transport. uvicorn's ASGI ``send`` also writes each frame in one synchronous call, so frames of
the two paths never interleave. The protocol that makes a ``Wire`` is ``uvicorn_websocket.py``'s.
"""

from __future__ import annotations

import asyncio
from typing import Protocol

from starlette.types import Scope
from websockets.server import ServerProtocol

from sparkwire.gateway.transport.contract import Lane, Listener, serialize_text_frames, write_direct
from sparkwire.gateway.transport.queues import MAX_BUFFERED_BYTES

WIRE_EXTENSION = "sparkwire.wire"


class WireProtocol(Protocol):
    """What a ``Wire`` reads of the uvicorn protocol under it (``uvicorn_websocket``'s, which makes it)."""

    writable: Writable
    transport: asyncio.Transport
    conn: ServerProtocol
    close_sent: bool
    disconnected: bool
    handshake_complete: bool

    def listen(self, listener: Listener | None) -> None: ...


class Wire:
    """A uvicorn connection's ``Transport``: writes straight to its asyncio transport."""

    __slots__ = ("_compressed", "_fd", "_protocol", "_writable")

    def __init__(self, protocol: WireProtocol) -> None:
        self._protocol = protocol
        self._writable = protocol.writable
        # Negotiated in the handshake, before this is made: a compressed connection's frames are its own.
        self._compressed = bool(protocol.conn.extensions)
        self._fd = -2  # the socket a direct write may go to (``socket_fd``), looked up at the first write

    def lane(self) -> Lane | None:
        """The protocol's ``Writable`` as the gate (closed by a close sent, a disconnect or a paused buffer, see
        ``Writable.open``) and its asyncio transport; none when compression was negotiated (the frames would
        need the connection's own compressor)."""
        transport = self._protocol.transport
        if self._compressed or transport is None:
            return None
        return Lane(self._writable, transport, self._socket_fd(transport))

    def reply(self, text: str) -> bool:
        return self.write(serialize_text_frames([text]), urgent=True)

    def write(self, frames: bytes, *, urgent: bool = False) -> bool:
        """Write serialized frames now; False (nothing written) when they must not be: the connection is
        closing or negotiated compression; or, unless ``urgent``, the socket's buffer is full (the ASGI
        path waits for it to drain, and a client that never drains ends as a slow consumer)."""
        # Called once per connection per live batch: the checks read what is at hand first (an attribute,
        # not a method) and a refused write costs no call into the transport.
        protocol = self._protocol
        if protocol.close_sent or protocol.disconnected or not protocol.handshake_complete or self._compressed:
            return False
        transport = protocol.transport
        if not (self._writable._set if not urgent else transport.get_write_buffer_size() < MAX_BUFFERED_BYTES):
            return False
        if transport.is_closing():
            return False
        write_direct(transport, self._socket_fd(transport), frames)
        return True

    def _socket_fd(self, transport: asyncio.BaseTransport) -> int:
        """``socket_fd(transport)``, looked up once for the lane and the writes alike."""
        if self._fd == -2:
            self._fd = socket_fd(transport)
        return self._fd

    def listen(self, listener: Listener | None) -> None:
        """Hand every later client message (and those not yet received) to ``listener`` as it arrives,
        instead of queueing it for ``receive()``; None goes back to queueing."""
        self._protocol.listen(listener)


def socket_fd(transport: asyncio.BaseTransport) -> int:
    """The plain TCP socket under ``transport``, or -1 (TLS, a pipe, a transport without one): where a
    lane may write its bytes itself."""
    if transport.get_extra_info("sslcontext") is not None:
        return -1
    sock = transport.get_extra_info("socket")
    try:
        return int(sock.fileno()) if sock is not None else -1
    except (AttributeError, OSError, ValueError):
        return -1


def wire_of(scope: Scope) -> Wire | None:
    wire = (scope.get("extensions") or {}).get(WIRE_EXTENSION)
    return wire if isinstance(wire, Wire) else None


class Writable:
    """The protocol's "may write" flag: asyncio.Event's interface without its deque per connection. Also the
    gate of the connection's ``Lane``: ``open`` while the flag is set and the connection was not ``shut``
    (a close sent or the connection lost; the protocol's ``close_sent`` and ``disconnected`` shut it), so
    the hub's fan-out reads one attribute where ``Wire.write`` reads four of the protocol's."""

    __slots__ = ("_set", "_shut", "_waiters", "open")

    def __init__(self) -> None:
        self._set = True
        self._shut = False
        self.open = True
        self._waiters: list[asyncio.Future[None]] | None = None

    def is_set(self) -> bool:
        return self._set

    def shut(self) -> None:
        """No direct write from now on (the connection is closing or gone); waiters are not woken."""
        self._shut = True
        self.open = False

    def set(self) -> None:
        self._set = True
        self.open = not self._shut
        waiters, self._waiters = self._waiters, None
        for waiter in waiters or ():
            if not waiter.done():
                waiter.set_result(None)

    def clear(self) -> None:
        self._set = False
        self.open = False

    async def wait(self) -> None:
        if self._set:
            return
        waiter = asyncio.get_running_loop().create_future()
        if self._waiters is None:
            self._waiters = []
        self._waiters.append(waiter)
        await waiter
