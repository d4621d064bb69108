"""One gateway pod's state: its stream hubs, its sessions, whether it drains, and how many connections it
holds; which connections it takes, serving one, and the tasks it runs while it is up."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Literal, get_args

from sparkwire.gateway import metrics
from sparkwire.gateway.connection.ack_budget import AckBudget
from sparkwire.gateway.connection.lifecycle import Connection
from sparkwire.gateway.fanout.hub import StreamHub
from sparkwire.gateway.settings import ConnectionSettings
from sparkwire.gateway.store.replication_watch import POLL_INTERVAL_S, ReplicationWatch
from sparkwire.gateway.store.session_store import SessionStore
from sparkwire.gateway.tasks import cancel_and_wait
from sparkwire.gateway.transport.closing import TurnAway
from sparkwire.gateway.transport.contract import FrameSocket, Transport
from sparkwire.protocol.close_codes import CloseCode
from sparkwire.replaylog.port import LogBackend

# The label of ``sparkwire_gateway_accepted_connections``: which transport a connection came by.
TransportName = Literal["websocket", "sse"]


@dataclass
class Gateway:
    backend: LogBackend  # the log, the sessions and the store's health (Redis; memory in tests)
    streams: list[str]
    connection: ConnectionSettings
    sessions: SessionStore
    allowed_origins: frozenset[str]
    ring_size: int
    send_queue: int
    allow_missing_origin: bool = False
    replication_poll_s: float = POLL_INTERVAL_S
    hubs: dict[str, StreamHub] = field(default_factory=dict)
    draining: asyncio.Event = field(default_factory=asyncio.Event)
    open_connections: int = 0

    def __post_init__(self) -> None:
        self.hubs = {s: StreamHub(self.backend.stream(s), s, ring_size=self.ring_size, queue_size=self.send_queue)
                     for s in self.streams}
        # Each stream's ack policy, re-advertised to its connections as their number moves (``ack_budget``).
        self.acks = {s: AckBudget(self.connection) for s in self.streams}
        self.replication = ReplicationWatch(self.backend.replication, interval_s=self.replication_poll_s)
        # Each stream's (and transport's) labelled metrics, looked up once: ``labels()`` per connection was ~3 %
        # of a handshake's CPU when thousands connect at once.
        self._open_gauges = {s: metrics.CONNECTIONS.labels(stream=s) for s in self.streams}
        self._accepted = {(s, t): metrics.CONNECTIONS_ACCEPTED.labels(stream=s, transport=t)
                          for s in self.streams for t in get_args(TransportName)}

    def drain(self) -> None:
        """Refuse new connections (readyz 503) and end the open ones with 1001 going_away."""
        self.draining.set()
        for hub in self.hubs.values():
            hub.end_all("draining")

    def why_turn_away(self, origin: str | None, stream: str) -> TurnAway | None:
        """Why this pod does not take a connection (WebSocket or SSE) from ``origin`` to ``stream``, if it
        does not. The allow-list stops other sites' pages. Every browser sends Origin on a WebSocket (and
        on a cross-origin POST), so a request without one comes from a non-browser client, or through a
        proxy that strips the header (which would silently switch the check off): turned away unless the
        operator allows it."""
        if self.allowed_origins:
            if origin is None and not self.allow_missing_origin:
                return TurnAway(CloseCode.POLICY_VIOLATION, "an Origin header is required (or --allow-missing-origin)")
            if origin is not None and origin not in self.allowed_origins:
                return TurnAway(CloseCode.POLICY_VIOLATION, f"origin {origin!r} not allowed")
        if stream not in self.hubs:
            return TurnAway(CloseCode.UNKNOWN_STREAM, f"stream {stream!r} is not served here")
        if self.draining.is_set():
            return TurnAway(CloseCode.GOING_AWAY, "pod draining")
        return None

    async def serve(self, socket: FrameSocket, transport: Transport, stream: str,
                    transport_name: TransportName) -> None:
        """Run a connection taken on ``socket`` (its ``transport``: the same object for SSE) until it ends."""
        self.open_connections += 1
        open_gauge = self._open_gauges[stream]
        open_gauge.inc()
        self._accepted[(stream, transport_name)].inc()
        try:
            await Connection(socket, transport, self.hubs[stream], self.sessions, self.connection,
                             self.draining, self.acks[stream]).serve()
        finally:
            self.open_connections -= 1
            open_gauge.dec()

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """The pod's tasks while it is up (a reader per stream, the session flush, the replication watch); at
        the end it drains, ends them and closes the store."""
        tasks = [asyncio.create_task(hub.run(), name=f"hub-{s}") for s, hub in self.hubs.items()]
        sessions = asyncio.create_task(self.sessions.run(), name="session-flush")
        replication = asyncio.create_task(self.replication.run(), name="redis-replication")
        try:
            yield
        finally:
            self.drain()
            await cancel_and_wait([*tasks, sessions, replication])
            await self.backend.close()
