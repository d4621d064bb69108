"""The socket under a connection: uvicorn's sans-I/O WebSocket protocol, lighter per connection, with a
direct path for live batches and for the client's frames.

Two costs dominated a caught-up connection (docs/benchmarks.md, flame graphs at 1k and 5k clients):

* **Sending.** Waking each connection's task to send the same batch through ASGI built the same frame
  again per connection. The hub serializes a batch once and the connection's ``Wire`` (``wire.py``) puts
  those bytes on every caught-up connection's transport.
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
from collections.abc import Sequence
from types import GeneratorType
from typing import Any

from uvicorn.config import Config
from uvicorn.protocols.utils import ClientDisconnected, get_client_addr, get_path_with_query_string
from uvicorn.protocols.websockets.websockets_sansio_impl import WebSocketsSansIOProtocol
from uvicorn.server import ServerState
from websockets.protocol import Protocol, State
from websockets.server import ServerProtocol
from websockets.streams import StreamReader

from sparkwire.gateway.transport.bad_input import BAD_INPUT_LOG
from sparkwire.gateway.transport.contract import Listener
from sparkwire.gateway.transport.lean_server_protocol import LeanServerProtocol, deflate_factories
from sparkwire.gateway.transport.queues import Inbox
from sparkwire.gateway.transport.short_frames import read_short_text_frame
from sparkwire.gateway.transport.upgrade import PlainUpgrade
from sparkwire.gateway.transport.wire import WIRE_EXTENSION, Wire, Writable

# Where uvicorn's per-connection lines go ("[accepted]", and websockets' "connection closed"): a child of
# uvicorn's logger, so its handlers and format apply. Two INFO lines per client, each a write to stderr, were
# ~5 % of a handshake's CPU when thousands connect at once; ``sparkwire gateway`` shows them only at
# ``--log-level debug`` (errors always).
CONNECTION_LOG = logging.getLogger("uvicorn.error.connections")

# Where websockets' frame parser (``Protocol.parse``, a generator) waits between two frames: in
# ``StreamReader.at_eof``, nothing of the next frame read (websockets is pinned; a unit test says so).
_PARSE_CODE = Protocol.parse.__code__
_SERVER_PARSE_CODE = ServerProtocol.parse.__code__
_AT_EOF_CODE = StreamReader.at_eof.__code__


class SparkwireWebSocketProtocol(WebSocketsSansIOProtocol):
    """uvicorn's sans-I/O WebSocket protocol with a ``Wire`` in its scope, a lighter queue and flag, and
    the handshake's request and response dropped once accepted."""

    # Every attribute uvicorn's protocol sets (uvicorn is pinned), and ours, as slots: with its ~40 attributes,
    # past CPython's limit of 30 keys shared between the instances of a class, each connection's protocol kept
    # a dict of its own, 1.6 KB of an idle connection's ~14 (docs/benchmarks.md); slots are 8 bytes each.
    # An attribute a later uvicorn adds still works (it goes to the instance dict, and a test says so).
    __slots__ = (
        "_close_sent", "_disconnected", "app", "app_returned", "app_state", "asgi_version", "client", "close_timeout",
        "close_timer", "config", "conn", "connections", "curr_msg_data_type", "default_headers", "frames",
        "handshake_complete", "handshake_initiated", "initial_response", "last_ping_rtt", "logger", "loop",
        "pending_ping_payload", "ping_interval", "ping_sent_at", "ping_timeout", "ping_timer", "pong_timer", "queue",
        "read_paused", "request", "response", "root_path", "scheme", "scope", "server", "tasks", "transport",
        "upgrade", "writable",
    )

    def __init__(self, config: Config, server_state: ServerState, app_state: dict[str, Any],
                 _loop: asyncio.AbstractEventLoop | None = None, *, opened: bool = False) -> None:
        """uvicorn's ``WebSocketsSansIOProtocol.__init__`` (the pinned version: a unit test compares the
        attributes each sets) without what this class replaces, built once per connection: with its
        asyncio.Queue and Event made only to be replaced, two ``getLogger`` calls and websockets' request
        parser started for a request ``open_upgrade`` never parses, it was 7 % of a handshake's CPU.
        ``opened``: for ``open_upgrade``, websockets' side starts open, parsing frames from the first byte."""
        if not config.loaded:
            config.load()
        self.config = config
        self.app = config.loaded_app
        self.loop = _loop or asyncio.get_event_loop()
        self.logger = CONNECTION_LOG
        self.root_path = config.root_path
        self.asgi_version = config.asgi_version
        self.app_state = app_state
        self.connections = server_state.connections
        self.tasks = server_state.tasks
        self.default_headers = server_state.default_headers
        self.transport = None  # type: ignore[assignment]
        self.server = self.client = self.scheme = None  # type: ignore[assignment]
        self.queue: Inbox = Inbox()  # type: ignore[assignment]
        self.writable: Writable = Writable()  # type: ignore[assignment]  # before close_sent: its setter shuts it
        self.handshake_initiated = self.handshake_complete = self.close_sent = self.disconnected = False
        self.close_timer = None
        self.close_timeout = 10.0
        self.initial_response = None
        # Opened (``open_upgrade``): websockets' side copied from a template (``lean_server_protocol``).
        self.conn = LeanServerProtocol.open(deflate=config.ws_per_message_deflate, max_size=config.ws_max_size,
                                            logger=CONNECTION_LOG) if opened else ServerProtocol(
            extensions=deflate_factories() if config.ws_per_message_deflate else [], max_size=config.ws_max_size,
            logger=CONNECTION_LOG)
        self.read_paused = False
        self.ping_interval = config.ws_ping_interval
        self.ping_timeout = config.ws_ping_timeout
        self.ping_timer = self.pong_timer = None
        self.pending_ping_payload = None
        self.ping_sent_at = self.last_ping_rtt = 0.0
        self.frames = []
        self.curr_msg_data_type = "bytes"
        self.app_returned = False
        self.upgrade: PlainUpgrade | None = None

    # uvicorn sets these two wherever a close goes out or the connection is lost; each shuts the ``Lane``'s gate.
    @property
    def close_sent(self) -> bool:
        return self._close_sent

    @close_sent.setter
    def close_sent(self, value: bool) -> None:
        self._close_sent = value
        if value:
            self.writable.shut()

    @property
    def disconnected(self) -> bool:
        return self._disconnected

    @disconnected.setter
    def disconnected(self, value: bool) -> None:
        self._disconnected = value
        if value:
            self.writable.shut()

    @classmethod
    def opened_on(cls, transport: asyncio.Transport, upgrade: PlainUpgrade, headers: list[tuple[bytes, bytes]],
                  server: tuple[str, int | None] | None, client: tuple[str, int] | None, *, secure: bool,
                  config: Config, server_state: ServerState, app_state: dict[str, Any],
                  loop: asyncio.AbstractEventLoop | None = None) -> SparkwireWebSocketProtocol:
        """A protocol of this class that takes ``transport`` over for a checked plain ``upgrade``
        (``open_upgrade``): what the front door does with a connection's first request, and uvicorn's HTTP
        protocol with an upgrade after a kept-alive request."""
        protocol = cls(config=config, server_state=server_state, app_state=app_state, _loop=loop, opened=True)
        protocol.open_upgrade(transport, upgrade, headers, server, client, secure=secure)
        transport.set_protocol(protocol)
        return protocol

    def open_upgrade(self, transport: asyncio.Transport, upgrade: PlainUpgrade, headers: list[tuple[bytes, bytes]],
                     server: tuple[str, int | None] | None, client: tuple[str, int] | None, secure: bool) -> None:
        """Take ``transport`` over for an upgrade ``transport.upgrade`` checked, in place of ``connection_made``
        and the request's second parse: the same scope and first event for the application as
        ``handle_connect`` makes, websockets' frame parser from the first byte, and the 101 (``upgrade``'s
        answer) written when the application accepts."""
        self.connections.add(self)
        self.transport = transport
        self.server, self.client, self.scheme = server, client, "wss" if secure else "ws"
        self.request = self.response = None  # type: ignore[assignment]
        if self.conn.state is not State.OPEN:  # made without ``opened``: its parser waits for a request
            self.conn.state = State.OPEN
            self.conn.parser = Protocol.parse(self.conn)
            next(self.conn.parser)
        self.upgrade = upgrade
        self.handshake_initiated = True
        self.scope = {
            "type": "websocket", "asgi": {"version": self.asgi_version, "spec_version": "2.4"},
            "http_version": "1.1", "scheme": self.scheme, "server": server, "client": client,
            "root_path": self.root_path, "path": upgrade.path, "raw_path": upgrade.raw_path,
            "query_string": upgrade.query_string, "headers": headers, "subprotocols": [],
            "state": self.app_state.copy(),
            "extensions": {"websocket.http.response": {}, WIRE_EXTENSION: Wire(self)},  # type: ignore[dict-item]
        }
        self.queue.put_nowait({"type": "websocket.connect"})
        task = self.loop.create_task(self.run_asgi())
        task.add_done_callback(self.on_task_complete)
        self.tasks.add(task)

    async def _accept_upgrade(self, upgrade: PlainUpgrade, message: Any) -> None:
        """The application's accept of an upgrade ``open_upgrade`` took: its 101, as uvicorn answers it
        (uvicorn's default headers and the application's, names lower-cased)."""
        await self.writable.wait()
        if self.disconnected:
            raise ClientDisconnected()
        if self.logger.isEnabledFor(logging.INFO):
            self.logger.info('%s - "WebSocket %s" [accepted]', get_client_addr(self.scope),
                             get_path_with_query_string(self.scope))
        headers = [(name.lower(), value) for name, value in (self.default_headers + list(message.get("headers", [])))]
        if message.get("subprotocol"):
            headers.append((b"sec-websocket-protocol", message["subprotocol"].encode()))
        if not self.transport.is_closing():
            self.handshake_complete = True
            self.transport.write(upgrade.response(headers))
            self.start_keepalive()

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

    def data_received(self, data: bytes) -> None:
        """A listening connection's short text frames (its acks and pings) read here (``short_frames``), from
        the first byte on: only while websockets' parser is between two frames with nothing buffered, and
        every byte from the first frame not read so on goes websockets' way (docs/design-notes.md, "A client's
        acks read without a parser"). A 125-byte frame is within any message size limit ``sparkwire gateway``
        sets (``ws_max_size`` is at least 64 KiB), so websockets would not refuse one read here for its size."""
        if self.queue.listener is not None and not self._close_sent and self._between_frames():
            start = 0
            while self.queue.listener is not None and not self._close_sent:
                frame = read_short_text_frame(data, start)
                if frame is None:
                    break
                text, start = frame
                self.queue.put_nowait({"type": "websocket.receive", "text": text})
            if start == len(data):
                return
            data = data[start:]
        super().data_received(data)

    def _between_frames(self) -> bool:
        """websockets' side of an open, uncompressed connection waits for the first byte of a frame, with no
        fragmented message begun: its parser (``ServerProtocol.parse``, which delegates to ``Protocol.parse``
        once open, or ``Protocol.parse`` itself) suspended in ``StreamReader.at_eof``."""
        conn = self.conn
        if conn.state is not State.OPEN or conn.current_size is not None or conn.reader.buffer or conn.extensions:
            return False
        generator: object = conn.parser
        outer = None
        while isinstance(generator, GeneratorType):
            code = generator.gi_code
            if code is _AT_EOF_CODE:
                return outer is _PARSE_CODE
            if code is not _PARSE_CODE and code is not _SERVER_PARSE_CODE:
                return False
            outer, generator = code, generator.gi_yieldfrom
        return False

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
        upgrade = self.upgrade
        if upgrade is not None and message["type"] == "websocket.accept" and not self.handshake_complete:
            self.upgrade = None
            await self._accept_upgrade(upgrade, message)
            return
        self.upgrade = None  # anything else before the accept (a close, a response) goes uvicorn's way
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
