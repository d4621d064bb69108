"""uvicorn's HTTP protocol for a gateway pod: a deadline for request headers, the connection cap applied to
WebSocket upgrades too, a plain upgrade handed over without a second parse, and freed at the upgrade."""

from __future__ import annotations

import asyncio

import httptools
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from sparkwire.gateway import metrics
from sparkwire.gateway.transport.bad_input import BAD_INPUT_LOG
from sparkwire.gateway.transport.upgrade import plain_upgrade
from sparkwire.gateway.transport.uvicorn_websocket import SparkwireWebSocketProtocol

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
    * **One parse of an upgrade.** A plain WebSocket upgrade goes to ``SparkwireWebSocketProtocol.open_upgrade``
      with the headers parsed here (``transport.upgrade``); uvicorn would write the request out for websockets
      to parse again. Anything else still goes uvicorn's way.
    * **Freed at the upgrade.** Its parser holds its bound callbacks (``on_url``, ``on_header``...), a cycle with
      the protocol, which holds the connection's transport, socket, flow control and handshake headers.
      After an upgrade nothing calls it again, so that cycle was garbage for the cyclic collector alone:
      every connection that lived long enough to be promoted to an old generation (a client that never
      sends its hello, held the whole hello timeout) left ~6 KB until a full collection, which
      ``server.GC_THRESHOLDS`` makes rare. RSS grew by that much per hello-less connection (issue 39:
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

    def connection_made(self, transport: asyncio.Transport,  # type: ignore[override]
                        header_timeout_s: float | None = None) -> None:
        """``header_timeout_s``: what is left of the deadline when ``front_door`` hands a connection over."""
        super().connection_made(transport)
        self._arm_header_deadline(header_timeout_s)

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

    def _arm_header_deadline(self, timeout_s: float | None = None) -> None:
        self._header_deadline = self.loop.call_later(self.header_timeout_s if timeout_s is None else timeout_s,
                                                     self._headers_too_late)

    def _disarm_header_deadline(self) -> None:
        if self._header_deadline is not None:
            self._header_deadline.cancel()
            self._header_deadline = None

    def _headers_too_late(self) -> None:
        self._header_deadline = None
        close_headers_too_late(self.transport, self.header_timeout_s)

    def handle_websocket_upgrade(self) -> None:
        if self._over_limit():
            refuse_over_limit(self.transport)
            return
        upgrade = plain_upgrade(self.scope["method"], self.url, self.headers,
                                compression=self.config.ws_per_message_deflate, root_path=self.root_path)
        protocol_class = self.ws_protocol_class
        if upgrade is not None and isinstance(protocol_class, type) and issubclass(protocol_class,
                                                                                    SparkwireWebSocketProtocol):
            # Checked once from this parse (``transport.upgrade``), not written out for websockets to parse again.
            self.connections.discard(self)
            protocol_class.opened_on(self.transport, upgrade, self.headers, self.server, self.client,
                                     secure=self.scheme == "https", config=self.config,
                                     server_state=self.server_state, app_state=self.app_state)
        else:
            super().handle_websocket_upgrade()
        self.parser = None  # type: ignore[assignment]
        self.transport = None  # type: ignore[assignment]
        self.flow = None  # type: ignore[assignment]
        self.scope = None  # type: ignore[assignment]
        self.headers = None  # type: ignore[assignment]



def close_headers_too_late(transport: asyncio.Transport, header_timeout_s: float) -> None:
    """A connection whose request headers did not complete in ``header_timeout_s``: counted as bad input
    ``header_timeout``, logged, and closed."""
    BAD_INPUT_LOG.report("header_timeout", f"no complete request headers in {header_timeout_s:g} s, closed")
    transport.close()


def refuse_over_limit(transport: asyncio.Transport) -> None:
    """A WebSocket upgrade past the pod's connection cap: 503, counted, and the connection closed."""
    metrics.CONNECTIONS_REFUSED.labels(reason="max_connections").inc()
    body = b"pod at its connection limit: retry another pod"
    transport.write(b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: text/plain; charset=utf-8\r\n"
                    b"content-length: " + str(len(body)).encode() + b"\r\nconnection: close\r\n"
                    b"retry-after: 1\r\n\r\n" + body)
    transport.close()
