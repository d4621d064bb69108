"""The socket under a connection: uvicorn's sans-I/O WebSocket protocol, lighter per connection, with a
direct path for live batches and for the client's frames.

Two costs dominated a caught-up connection (docs/benchmarks.md, flame graphs at 1k and 5k clients):

* **Sending.** Waking each connection's task to send the same batch through ASGI built the same frame
  again per connection. Server-to-client frames are not masked, so without compression a frame's bytes do
  not depend on the connection: the hub serializes a batch once and ``Wire.write`` puts those bytes on
  every caught-up connection's transport. uvicorn's ASGI ``send`` also writes each frame in one
  synchronous call, so frames of the two paths never interleave.
* **Receiving and memory.** An asyncio.Queue (four deques), an Event and a receiver task per connection
  were a third of an idle connection's memory, and each ack went through the queue, a task wake-up and a
  pause/resume of the socket's reading. Once a connection ``listen``s, its client's frames are handed to
  it as they are parsed, in the protocol's own callback.

Run it with ``uvicorn.Config(ws=SparkwireWebSocketProtocol)``; the ASGI application finds the connection's
``Wire`` in ``scope["extensions"]``. Under any other ASGI server (or Starlette's ``TestClient``) a connection
gets an ``AsgiTransport``: the same ``Transport`` interface over plain ASGI ``send`` and ``receive``, with no
direct path (every live batch goes through the connection's task).
"""

from __future__ import annotations

import asyncio
import logging
import time
import typing
from collections import deque
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

import httptools
from starlette.types import Scope
from starlette.websockets import WebSocket, WebSocketDisconnect, WebSocketState
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
from uvicorn.protocols.websockets.websockets_sansio_impl import WebSocketsSansIOProtocol
from websockets.frames import Frame, Opcode
from websockets.protocol import Protocol, State

from sparkwire.gateway import metrics

Message = dict[str, Any]  # an ASGI receive event
Listener = Callable[[Message], None]

WIRE_EXTENSION = "sparkwire.wire"

# A client that sends frames which need an answer (pings) but never reads the answers would grow its
# connection's buffer without bound: past this many unsent bytes, direct writes are refused.
MAX_BUFFERED_BYTES = 1 << 20

# Where uvicorn's per-connection lines go ("[accepted]", and websockets' "connection closed"): a child of
# uvicorn's logger, so its handlers and format apply. Two INFO lines per client, each a write to stderr, were
# ~5 % of a handshake's CPU when thousands connect at once; ``sparkwire gateway`` shows them only at
# ``--log-level debug`` (errors always).
CONNECTION_LOG = logging.getLogger("uvicorn.error.connections")

# How often at most the log gets a line for one kind of bad client input.
BAD_INPUT_LOG_INTERVAL_S = 60.0


class BadInputLog:
    """Bad client input below the protocol, counted one by one (``sparkwire_gateway_bad_input_total``) and
    logged at most once per kind per interval, with how many came since the last line. uvicorn logged a
    traceback for every text frame that was not UTF-8: a client could fill a pod's log at its own pace."""

    def __init__(self, logger: logging.Logger, interval_s: float = BAD_INPUT_LOG_INTERVAL_S) -> None:
        self.logger = logger
        self.interval_s = interval_s
        self._logged_at: dict[str, float] = {}
        self._unlogged: dict[str, int] = {}

    def report(self, kind: str, detail: str) -> None:
        metrics.BAD_INPUT.labels(kind=kind).inc()
        now = time.monotonic()
        logged_at = self._logged_at.get(kind)
        if logged_at is not None and now - logged_at < self.interval_s:
            self._unlogged[kind] = self._unlogged.get(kind, 0) + 1
            return
        self._logged_at[kind] = now
        since = self._unlogged.pop(kind, 0)
        self.logger.warning("bad client input %s: %s (%d more of this kind since its last line; all counted in "
                            "sparkwire_gateway_bad_input_total)", kind, detail, since)


BAD_INPUT_LOG = BadInputLog(logging.getLogger(__name__))


def serialize_text_frames(texts: Sequence[str]) -> bytes:
    """``texts`` as unmasked, uncompressed WebSocket text frames, back to back."""
    return b"".join(Frame(Opcode.TEXT, text.encode()).serialize(mask=False) for text in texts)


class FrameSocket(typing.Protocol):
    """What a connection does with its socket from its own task: the WebSocket's (Starlette's
    ``WebSocket`` is one) or the SSE response's (``sse.SseSocket``)."""

    async def receive(self) -> typing.MutableMapping[str, Any]: ...

    async def send_text(self, data: str) -> None: ...

    async def close(self, code: int = 1000, reason: str | None = None) -> None: ...


class Transport(typing.Protocol):
    """What a connection does on its socket besides ``websocket.send_text`` from its own task."""

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


class Wire:
    """A uvicorn connection's ``Transport``: writes straight to its asyncio transport."""

    __slots__ = ("_protocol",)

    def __init__(self, protocol: SparkwireWebSocketProtocol) -> None:
        self._protocol = protocol

    def reply(self, text: str) -> bool:
        return self.write(serialize_text_frames([text]), urgent=True)

    def write(self, frames: bytes, *, urgent: bool = False) -> bool:
        """Write serialized frames now; False (nothing written) when they must not be: the connection is
        closing or negotiated compression; or, unless ``urgent``, the socket's buffer is full (the ASGI
        path waits for it to drain, and a client that never drains ends as a slow consumer)."""
        protocol = self._protocol
        transport = protocol.transport
        if (protocol.close_sent or protocol.disconnected or not protocol.handshake_complete
                or protocol.conn.extensions or transport.is_closing()):
            return False
        if not (protocol.writable.is_set() if not urgent else transport.get_write_buffer_size() < MAX_BUFFERED_BYTES):
            return False
        transport.write(frames)
        return True

    def listen(self, listener: Listener | None) -> None:
        """Hand every later client message (and those not yet received) to ``listener`` as it arrives,
        instead of queueing it for ``receive()``; None goes back to queueing."""
        self._protocol.listen(listener)


def payload(message: Mapping[str, Any]) -> str | bytes:
    """A client message's text or bytes; a disconnect raises ``WebSocketDisconnect``."""
    if message["type"] == "websocket.disconnect":
        raise WebSocketDisconnect(int(str(message.get("code", 1000))))
    text, data = message.get("text"), message.get("bytes")
    if isinstance(text, str):
        return text
    return data if isinstance(data, bytes) else b""


def wire_of(scope: Scope) -> Wire | None:
    wire = (scope.get("extensions") or {}).get(WIRE_EXTENSION)
    return wire if isinstance(wire, Wire) else None


class Replies:
    """Frames (pongs) for a transport with no direct write (SSE, plain ASGI), sent in order by one task of
    their own. Bounded as a direct write is, by the bytes waiting (``MAX_BUFFERED_BYTES``), not by a count:
    a cap of 16 pongs in flight closed an SSE client that posted 17 pings in one body as a slow consumer,
    where a WebSocket takes thousands in one write (issue 39)."""

    __slots__ = ("_pending", "_pending_bytes", "_send_text", "_task")

    def __init__(self, send_text: Callable[[str], Awaitable[None]]) -> None:
        self._send_text = send_text
        self._pending: deque[str] = deque()
        self._pending_bytes = 0
        self._task: asyncio.Task[None] | None = None

    def send(self, text: str) -> bool:
        """Queue ``text``; False (not queued) when the frames waiting already fill the bound."""
        if self._pending_bytes + len(text) > MAX_BUFFERED_BYTES:
            return False
        self._pending.append(text)
        self._pending_bytes += len(text)
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._send_pending())
        return True

    async def _send_pending(self) -> None:
        try:
            while self._pending:
                text = self._pending.popleft()
                self._pending_bytes -= len(text)
                try:
                    await self._send_text(text)
                except Exception:  # the connection's own task sees the socket's end
                    self._pending.clear()
                    self._pending_bytes = 0
        finally:
            self._task = None


class AsgiTransport:
    """A ``Transport`` over plain ASGI: no direct writes (``write`` declines, so live batches go through the
    connection's task), pongs sent by a task of their own, and the client's messages read by a task that
    hands them to the listener. Per connection it costs that task; the uvicorn ``Wire`` costs none."""

    def __init__(self, websocket: WebSocket) -> None:
        self.websocket = websocket
        self._reader: asyncio.Task[None] | None = None
        self._replies = Replies(websocket.send_text)

    def write(self, frames: bytes) -> bool:
        return False

    def reply(self, text: str) -> bool:
        return self.websocket.application_state == WebSocketState.CONNECTED and self._replies.send(text)

    def listen(self, listener: Listener | None) -> None:
        if self._reader is not None:
            self._reader.cancel()
            self._reader = None
        if listener is not None:
            self._reader = asyncio.get_running_loop().create_task(self._read(listener))

    async def _read(self, listener: Listener) -> None:
        while True:
            message: Message = dict(await self.websocket.receive())
            listener(message)
            if message["type"] == "websocket.disconnect":
                return


class Inbox:
    """The protocol's queue of ASGI receive events: a list and, while the application waits, one future;
    or, while a listener is set, straight to it."""

    __slots__ = ("_items", "_waiter", "listener")

    def __init__(self) -> None:
        self._items: list[Message] = []
        self._waiter: asyncio.Future[None] | None = None
        self.listener: Listener | None = None

    def put_nowait(self, message: Message) -> None:
        if self.listener is not None:
            self.listener(message)
            return
        self._items.append(message)
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    async def get(self) -> Message:
        while not self._items:
            self._waiter = asyncio.get_running_loop().create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None
        return self._items.pop(0)

    def empty(self) -> bool:
        return not self._items

    def __len__(self) -> int:
        return len(self._items)

    def listen(self, listener: Listener | None) -> None:
        self.listener = listener
        if listener is not None:
            items, self._items = self._items, []
            for message in items:
                listener(message)


class Writable:
    """The protocol's "may write" flag: asyncio.Event's interface without its deque per connection."""

    __slots__ = ("_set", "_waiters")

    def __init__(self) -> None:
        self._set = True
        self._waiters: list[asyncio.Future[None]] | None = None

    def is_set(self) -> bool:
        return self._set

    def set(self) -> None:
        self._set = True
        waiters, self._waiters = self._waiters, None
        for waiter in waiters or ():
            if not waiter.done():
                waiter.set_result(None)

    def clear(self) -> None:
        self._set = False

    async def wait(self) -> None:
        if self._set:
            return
        waiter = asyncio.get_running_loop().create_future()
        if self._waiters is None:
            self._waiters = []
        self._waiters.append(waiter)
        await waiter


class SparkwireWebSocketProtocol(WebSocketsSansIOProtocol):
    """uvicorn's sans-I/O WebSocket protocol with a ``Wire`` in its scope, a lighter queue and flag, and
    the handshake's request and response dropped once accepted."""

    # Every attribute uvicorn's protocol sets (uvicorn is pinned), and ours, as slots: with its ~40 attributes,
    # past CPython's limit of 30 keys shared between the instances of a class, each connection's protocol kept
    # a dict of its own, 1.6 KB of an idle connection's ~14 (docs/benchmarks.md); slots are 8 bytes each.
    # An attribute a later uvicorn adds still works (it goes to the instance dict, and a test says so).
    __slots__ = (
        "app", "app_returned", "app_state", "asgi_version", "client", "close_sent", "close_timeout", "close_timer",
        "config", "conn", "connections", "curr_msg_data_type", "default_headers", "disconnected", "frames",
        "handshake_complete", "handshake_initiated", "initial_response", "last_ping_rtt", "logger", "loop",
        "pending_ping_payload", "ping_interval", "ping_sent_at", "ping_timeout", "ping_timer", "pong_timer", "queue",
        "read_paused", "request", "response", "root_path", "scheme", "scope", "server", "tasks", "transport",
        "writable",
    )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.logger = self.conn.logger = CONNECTION_LOG
        self.queue: Inbox = Inbox()  # type: ignore[assignment]
        self.writable: Writable = Writable()  # type: ignore[assignment]
        self.app_returned = False

    def handle_connect(self, event: Any) -> None:
        super().handle_connect(event)
        if self.response.status_code == 101:  # the application's task, created just now, starts later
            self.scope["extensions"] = {**(self.scope.get("extensions") or {}), WIRE_EXTENSION: Wire(self)}  # type: ignore[dict-item]

    def connection_lost(self, exc: Exception | None) -> None:
        super().connection_lost(exc)
        self._release_when_done()

    def on_task_complete(self, task: asyncio.Task[None]) -> None:
        super().on_task_complete(task)
        self.app_returned = True
        self._release_when_done()

    def _release_when_done(self) -> None:
        """Once the connection is lost and its application has returned, nothing uses this protocol again: drop
        the references that make it a cycle (the ``Wire`` in its scope, websockets' discard parser whose frame
        holds the connection, the transport that holds this protocol), so reference counting frees it at once.
        Left to the collector, the closed connections piled up until a full collection: 563,000 objects, a
        1.0-1.2 s stall of the pod when 10,000 clients left together (docs/benchmarks.md)."""
        if not (self.disconnected and self.app_returned):
            return
        scope = getattr(self, "scope", None)  # set once the handshake request arrived
        if scope is not None:
            scope.pop("extensions", None)
        self.conn.parser = None  # type: ignore[assignment]
        # A frame websockets refused (over the size limit, or malformed) is kept as ``parser_exc``, whose
        # traceback holds the parser's frame and so the connection: a cycle of ~40 objects per refused frame
        # that only a full collection freed (issue 39: the abuse benchmark's RSS rose by steps between them).
        self.conn.parser_exc = None
        self.transport = None  # type: ignore[assignment]

    def listen(self, listener: Listener | None) -> None:
        """See ``Wire.listen``. A message that arrived while nobody listened (a client's ping or ack
        between its hello and the end of its snapshot) paused the socket's reading, as uvicorn does for
        every queued message until ``receive()`` takes it; handing the queue to ``listener`` empties it,
        so reading resumes here. Left paused, no later frame of the client was ever read: its pongs and
        acks went unseen, and the pong timeout closed it with 4408 although it answered every ping."""
        self.queue.listen(listener)
        if listener is not None and self.read_paused and not self.transport.is_closing():
            self.read_paused = False
            self.transport.resume_reading()

    def send_receive_event_to_app(self) -> None:
        if self.queue.listener is None or self.close_sent:
            if self.curr_msg_data_type == "text" and not self.close_sent and not _utf8(self.frames):
                self.frames = []
                self._refuse_invalid_utf8()  # uvicorn's own path logs a traceback for each such frame
                return
            super().send_receive_event_to_app()  # queued, and reading paused until it is received
            return
        data = self.frames[0] if len(self.frames) == 1 else b"".join(self.frames)
        self.frames = []
        if self.curr_msg_data_type == "bytes":
            self.queue.put_nowait({"type": "websocket.receive", "bytes": data})
            return
        try:
            text = data.decode()
        except UnicodeDecodeError:
            self._refuse_invalid_utf8()
            return
        self.queue.put_nowait({"type": "websocket.receive", "text": text})

    def _refuse_invalid_utf8(self) -> None:
        """Close 1007 (RFC 6455: data not consistent with the message type), as uvicorn does, and count it."""
        BAD_INPUT_LOG.report("invalid_utf8", "a text frame that is not UTF-8, closed 1007")
        self.conn.send_close(1007)
        self.handle_parser_exception()

    async def send(self, message: Any) -> None:
        await super().send(message)
        if message["type"] == "websocket.accept" and self.handshake_complete:
            # The handshake's request and response are never read again: several KB of headers per idle
            # connection. The request is also a local of the handshake parser, which goes on parsing frames
            # for the connection's lifetime: a frame parser started afresh holds nothing. Swapped only
            # between frames, with nothing buffered (a client sends no frame before reading the response
            # just written), as websockets itself swaps its parser when closing.
            self.request = self.response = None  # type: ignore[assignment]
            conn = self.conn
            if not conn.reader.buffer and conn.state is State.OPEN:
                conn.parser = Protocol.parse(conn)
                next(conn.parser)


def _utf8(frames: Sequence[bytes]) -> bool:
    try:
        (frames[0] if len(frames) == 1 else b"".join(frames)).decode()
    except UnicodeDecodeError:
        return False
    return True


# Answered whatever the connection cap: the kubelet's probes (a liveness probe answered 503 would restart a
# pod at its cap) and Prometheus.
UNCAPPED_PATHS = frozenset({b"/healthz", b"/readyz", b"/metrics"})


class SparkwireHttpProtocol(HttpToolsProtocol):
    """uvicorn's httptools HTTP protocol with a deadline for a request's headers and a cap on the pod's
    connections that covers WebSocket upgrades, freed as soon as it hands a connection to the WebSocket
    protocol. Run it with ``uvicorn.Config(http=SparkwireHttpProtocol.configured(...))``.

    * **Headers in time.** uvicorn has no such timeout (its keep-alive timeout runs only between requests), so
      a client that opened a socket and sent nothing, or a byte now and then (slowloris), held it forever:
      240 of 240 still open after 55 s (issue 39). Past ``header_timeout_s`` from the connection or the
      first byte of a request, without its headers complete, the connection is closed (counted as bad input
      ``header_timeout``).
    * **A cap per pod.** Past ``max_connections`` connections (open or opening, of every kind), a WebSocket
      upgrade or an HTTP request gets 503 (uvicorn's own answer for ``limit_concurrency``). Not uvicorn's
      ``limit_concurrency`` itself: its WebSocket protocol does not check it, and it would answer the probes
      and ``/metrics`` 503 too, so a pod at its cap would fail its liveness probe and be restarted, dropping
      every client it holds.
    * **Freed at the upgrade.** Its parser holds its bound callbacks (``on_url``, ``on_header``...), a cycle with
      the protocol, which holds the connection's transport, socket, flow control and handshake headers.
      After an upgrade nothing calls it again, so that cycle was garbage for the cyclic collector alone:
      every connection that lived long enough to be promoted to an old generation (a client that never
      sends its hello, held the whole hello timeout) left ~6 KB until a full collection, which
      ``main.GC_THRESHOLDS`` makes rare. RSS grew by that much per hello-less connection (issue 39:
      2,000-connection bursts, 99 -> 145 MiB). Dropping the parser and the connection's objects here lets
      reference counting free it when ``data_received`` returns."""

    header_timeout_s: float = 10.0
    max_connections: int | None = None
    _header_deadline: asyncio.TimerHandle | None = None

    @classmethod
    def configured(cls, header_timeout_s: float, max_connections: int | None) -> type[SparkwireHttpProtocol]:
        """This protocol with its own limits (uvicorn constructs it with uvicorn's arguments only)."""
        return type(cls.__name__, (cls,), {"header_timeout_s": header_timeout_s, "max_connections": max_connections})

    def _over_limit(self) -> bool:
        """Whether this pod holds ``max_connections`` connections, this one included (as uvicorn counts)."""
        return self.max_connections is not None and len(self.connections) >= self.max_connections

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm_header_deadline()

    def on_message_begin(self) -> None:
        super().on_message_begin()
        if self._header_deadline is None:  # a later request on a kept-alive connection
            self._arm_header_deadline()

    def on_headers_complete(self) -> None:
        self._disarm_header_deadline()
        # uvicorn answers 503 to a request when ``limit_concurrency`` is reached: 0 says so for this request,
        # None lets it through; never for the probes and the metrics (and an upgrade is checked at the upgrade).
        upgrade = self.parser.should_upgrade() and self._should_upgrade()
        over = not upgrade and self._over_limit() and httptools.parse_url(self.url).path not in UNCAPPED_PATHS
        self.limit_concurrency = 0 if over else None
        if over:
            metrics.CONNECTIONS_REFUSED.labels(reason="max_connections").inc()
        super().on_headers_complete()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm_header_deadline()
        super().connection_lost(exc)

    def _arm_header_deadline(self) -> None:
        self._header_deadline = self.loop.call_later(self.header_timeout_s, self._headers_too_late)

    def _disarm_header_deadline(self) -> None:
        if self._header_deadline is not None:
            self._header_deadline.cancel()
            self._header_deadline = None

    def _headers_too_late(self) -> None:
        self._header_deadline = None
        BAD_INPUT_LOG.report("header_timeout", f"no complete request headers in {self.header_timeout_s:g} s, closed")
        self.transport.close()

    def handle_websocket_upgrade(self) -> None:
        if self._over_limit():
            self._refuse_over_limit()
            return
        super().handle_websocket_upgrade()
        self.parser = None  # type: ignore[assignment]
        self.transport = None  # type: ignore[assignment]
        self.flow = None  # type: ignore[assignment]
        self.scope = None  # type: ignore[assignment]
        self.headers = None  # type: ignore[assignment]

    def _refuse_over_limit(self) -> None:
        metrics.CONNECTIONS_REFUSED.labels(reason="max_connections").inc()
        body = b"pod at its connection limit: retry another pod"
        self.transport.write(b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: text/plain; charset=utf-8\r\n"
                             b"content-length: " + str(len(body)).encode() + b"\r\nconnection: close\r\n"
                             b"retry-after: 1\r\n\r\n" + body)
        self.transport.close()
