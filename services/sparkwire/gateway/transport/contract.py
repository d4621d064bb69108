"""What a connection asks of the socket under it, whatever carries it (a WebSocket under uvicorn or plain
ASGI, or SSE): ``FrameSocket`` for its own task, ``Transport`` for writes and replies outside it (and its
``Lane`` for the hub's fan-out), the ASGI ``Message`` a client's frame arrives as, and the bytes of WebSocket
text frames a direct write takes."""

from __future__ import annotations

import os
import typing
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from starlette.websockets import WebSocketDisconnect
from websockets.frames import Frame, Opcode

Message = dict[str, Any]  # an ASGI receive event
Listener = Callable[[Message], None]


def serialize_text_frames(texts: Sequence[str]) -> bytes:
    """``texts`` as unmasked, uncompressed WebSocket text frames, back to back."""
    return b"".join(Frame(Opcode.TEXT, text.encode()).serialize(mask=False) for text in texts)


def write_direct(transport: DirectWrites, fd: int, data: bytes) -> None:
    """``transport.write(data)``, with the bytes written to the socket ``fd`` first while the transport holds
    nothing unsent: what uvloop's write does too (one ``write`` tried at once, the rest buffered), without
    its bookkeeping per call, a ninth of a send's CPU at thousands of sends per batch (docs/design-notes.md,
    "A batch written once for every client"). Whatever the socket does not take goes to the transport after
    the part it took, so the order holds; an error goes there too, which meets it on its own write and closes
    as it always does."""
    if fd < 0 or transport.get_write_buffer_size():
        transport.write(data)
        return
    try:
        sent = os.write(fd, data)
    except (BlockingIOError, InterruptedError):
        sent = 0
    except OSError:
        transport.write(data)
        return
    if sent < len(data):
        transport.write(data[sent:])


class FrameSocket(typing.Protocol):
    """What a connection does with its socket from its own task: the WebSocket's (Starlette's
    ``WebSocket`` is one) or the SSE response's (``transport.sse.SseSocket``)."""

    async def receive(self) -> typing.MutableMapping[str, Any]: ...

    async def send_text(self, data: str) -> None: ...

    async def close(self, code: int = 1000, reason: str | None = None) -> None: ...


class Gate(typing.Protocol):
    """Whether a direct write may go now, kept by the socket as its state changes (``Lane``)."""

    @property
    def open(self) -> bool: ...


class DirectWrites(typing.Protocol):
    """The event loop's transport under a socket, as a ``Lane`` writes to it."""

    def write(self, data: bytes) -> None: ...

    def is_closing(self) -> bool: ...

    def get_write_buffer_size(self) -> int: ...


class Lane(typing.NamedTuple):
    """A socket's direct path for the hub's fan-out (``Subscription.arm_lane``): its ``gate`` is open while a
    direct write may go (uncompressed, no close sent, not disconnected, the buffer not paused), ``transport``
    takes the bytes. What the uvicorn ``Wire`` checks on each write, kept up to date by the socket instead, so
    the fan-out reads one flag per connection and not the protocol's state."""

    gate: Gate
    transport: DirectWrites
    # The transport's socket, for a write straight to it while the transport holds nothing unsent
    # (``subscription.write_direct``); -1: always through the transport (a TLS socket's bytes are not its own).
    fd: int = -1


class Transport(typing.Protocol):
    """What a connection does on its socket besides ``websocket.send_text`` from its own task."""

    def lane(self) -> Lane | None:
        """The socket's direct path for live batches, or None when it has none (plain ASGI, SSE, compression)."""
        ...

    def write(self, frames: bytes) -> bool:
        """Write a live batch's serialized frames now, from the hub's loop; False: not written (the
        connection's task sends it instead)."""
        ...

    def reply(self, text: str) -> bool:
        """Send one frame (a pong) from the receive callback, without waiting for the connection's task (the
        uvicorn ``Wire`` writes it at once, ahead of anything queued; the ASGI transport sends it from a task
        of its own); False when it cannot go (the connection is closing, or its client does not read)."""
        ...

    def listen(self, listener: Listener | None) -> None:
        """Hand every later client message (and those not yet received) to ``listener`` as it arrives;
        None stops."""
        ...


def payload(message: Mapping[str, Any]) -> str | bytes:
    """A client message's text or bytes; a disconnect raises ``WebSocketDisconnect``."""
    if message["type"] == "websocket.disconnect":
        raise WebSocketDisconnect(int(str(message.get("code", 1000))))
    text, data = message.get("text"), message.get("bytes")
    if isinstance(text, str):
        return text
    return data if isinstance(data, bytes) else b""
