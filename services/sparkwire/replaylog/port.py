"""The log port: everything a gateway asks of the store behind it — a stream's log and state, the clients'
sessions, the store's health — as one interface, like centrifuge's ``Broker`` and ``PresenceManager``.

Two implementations: Redis (``redis_backend.RedisBackend``, what pods run on) and memory
(``memory.MemoryBackend``, for tests that drive a gateway in process). The gateway holds a ``LogBackend``
and never a Redis client: every Redis command lives in this package. A store's failures surface as the
errors of ``UNAVAILABLE``, which the gateway answers with 4503 (or 503) and its readers back off from.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from redis.exceptions import RedisError

from sparkwire.replaylog.model import Entry, History, Snapshot, StreamMeta
from sparkwire.replaylog.replication import ReplicationStatus

# What a store raises when it cannot answer now (the memory store never does).
UNAVAILABLE: tuple[type[Exception], ...] = (RedisError, OSError)


class StreamLog(Protocol):
    """One stream's committed log, read by a gateway (written only by ``ReplayLogWriter``)."""

    async def meta(self) -> StreamMeta: ...

    async def follow(self, after_seq: int, count: int, block_ms: int) -> list[Entry]:
        """Up to ``count`` entries after ``after_seq``, waiting up to ``block_ms`` for one to be committed;
        empty when none came."""
        ...

    async def follow_after(self, seq: int, count: int, block_ms: int) -> tuple[Entry | None, list[Entry]]:
        """``follow`` with the entry the log holds at ``seq`` (None if none), read just before on the same
        connection, hence from the same node: a reader proves that the entries it gets continue the entry
        it read last, even when its connection was moved to another node in between (a failover)."""
        ...

    async def read_after(self, seq: int, count: int) -> list[Entry]:
        """Up to ``count`` entries with a seq greater than ``seq``, in order, without waiting."""
        ...

    async def snapshot(self) -> Snapshot:
        """The latest item per key and the seq it is consistent with, read at one instant."""
        ...

    async def history(self, last: int) -> History:
        """The last ``last`` entries and the state they end at, read at one instant."""
        ...

    async def descriptor(self) -> str | None:
        """The stream's descriptor (JSON text) as its writer stored it; None when it wrote none."""
        ...

    async def declare_rewind(self, epoch: str, seq: int, digest: str) -> tuple[str, str]:
        """The log went back under a reader that saw entry ``seq`` (``digest``, or ``""``) in ``epoch``: a new
        epoch, if the store confirms it in one step (``lua/declare_rewind.lua``). Returns (status, the
        stream's epoch now): ``"declared"``, ``"moved"`` (no longer ``epoch``) or ``"intact"``."""
        ...


@dataclass(frozen=True)
class SessionPosition:
    """The last ack of a session, the duplicate and gap counts its client reported with it, and the digest of
    the entry at ``seq`` it sent (``""`` when it sent none: a position that proves less); ``view``: the view
    id of the filtered subscription that acked it (``""``: unfiltered), since a position covered under one
    view is none in another (docs/protocol.md, "Filtered subscriptions")."""

    epoch: str
    seq: int
    duplicates: int = 0
    gaps: int = 0
    digest: str = ""
    view: str = ""


@dataclass(frozen=True)
class AckRecord:
    """One session's latest ack, as written: ``renew_ttl`` restarts its time to live."""

    session_id: str
    stream: str
    position: SessionPosition
    updated_ms: int
    subject: str
    renew_ttl: bool


@dataclass(frozen=True)
class ConnectRecord:
    """A session a pod starts serving: the subject it was issued to, and when."""

    session_id: str
    stream: str
    subject: str
    connected_ms: int


# A session as the store knows it: the subject it was issued to (None if no pod knows the id: never issued,
# or expired) and its last ack (None before the first).
SessionLookup = tuple[str | None, SessionPosition | None]


class SessionRecords(Protocol):
    """Client sessions shared by every pod: who a session id was issued to and its last ack."""

    async def lookup(self, sessions: Sequence[tuple[str, str]]) -> list[SessionLookup]:
        """Each (session id, stream) as the store knows it, in order, in one round trip: a pod's handshakes
        ask together (``gateway.batched``)."""
        ...

    async def connected(self, records: Sequence[ConnectRecord], *, pod: str, ttl_seconds: int) -> None:
        """The sessions are served by ``pod`` from now (issued to their subjects); their time to live
        restarts. One round trip."""
        ...

    async def write(self, acks: Sequence[AckRecord], *, pod: str, ttl_seconds: int) -> None:
        """The acks, in one round trip."""
        ...


class LogBackend(Protocol):
    """The store a gateway runs on."""

    def stream(self, name: str) -> StreamLog: ...

    @property
    def sessions(self) -> SessionRecords: ...

    async def ping(self) -> None:
        """Return when the store answers; raise one of ``UNAVAILABLE`` when it does not."""
        ...

    async def replication(self) -> ReplicationStatus:
        """How the store replicates (a lone store: a primary with no replicas)."""
        ...

    async def close(self) -> None:
        """Release the store's connections (a pod shutting down)."""
        ...


__all__ = ["UNAVAILABLE", "AckRecord", "ConnectRecord", "LogBackend", "SessionLookup", "SessionPosition",
           "SessionRecords", "StreamLog"]
