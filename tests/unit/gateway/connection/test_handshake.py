"""A connection's first steps alone: the hello in time and first, the token, which session a client may
adopt, then the welcome, and a snapshot only when the client cannot resume."""

from __future__ import annotations

import asyncio
import time

import pytest

from sparkwire.gateway.auth.tokens import AuthError, issue_token
from sparkwire.gateway.connection.ending import Close
from sparkwire.gateway.connection.handshake import Admission, admit, start
from sparkwire.gateway.store.session_store import SessionStore
from sparkwire.protocol import (
    Ack,
    CloseCode,
    Cursor,
    Hello,
    ProtocolError,
    SnapshotPart,
    Welcome,
    encode_ack,
    encode_hello,
    parse_server_frame,
)
from sparkwire.replaylog.memory import MemorySessionRecords
from sparkwire.replaylog.model import Snapshot, StreamMeta
from sparkwire.replaylog.port import SessionPosition

from ..connection_fakes import STREAM, FakeSocket, FakeWire, budget, hub_with, settings

SECRET = "s" * 32


def hello(session: str | None = None, cursor: Cursor | None = None, token: str | None = None) -> str:
    return encode_hello(Hello(version=1, session=session, cursor=cursor, token=token))


def store() -> SessionStore:
    return SessionStore(MemorySessionRecords(), ttl_seconds=60, pod="test")


async def a_session(sessions: SessionStore, subject: str, position: SessionPosition) -> str:
    """A session a pod issued to ``subject``, acked up to ``position``."""
    await sessions.connected("s1", STREAM, subject)
    sessions.acked("s1", STREAM, position, subject)
    await sessions.flush()
    return "s1"


def test_no_hello_in_time_closes_with_timeout() -> None:
    with pytest.raises(Close) as closed:
        asyncio.run(admit(FakeSocket().as_websocket(), STREAM, store(), settings(hello_timeout_s=0.05)))
    assert closed.value.code is CloseCode.TIMEOUT


def test_a_first_frame_that_is_not_a_hello_is_a_protocol_violation() -> None:
    socket = FakeSocket(encode_ack(Ack(seq=1, duplicates=0, gaps=0)))
    with pytest.raises(ProtocolError) as error:
        asyncio.run(admit(socket.as_websocket(), STREAM, store(), settings()))
    assert error.value.code is CloseCode.PROTOCOL_VIOLATION


def test_with_auth_a_token_for_another_stream_is_refused() -> None:
    token = issue_token(SECRET, ["orders"], 60, now=int(time.time()))
    with pytest.raises(AuthError):
        asyncio.run(admit(FakeSocket(hello(token=token)).as_websocket(), STREAM, store(), settings(auth_secret=SECRET)))


def test_a_session_is_adopted_only_by_the_subject_it_was_issued_to() -> None:
    async def run() -> tuple[Admission, Admission]:
        sessions = store()
        sid = await a_session(sessions, "alice", SessionPosition("e1", 7, duplicates=1))
        now = int(time.time())
        alice = issue_token(SECRET, [STREAM], 60, subject="alice", now=now)
        mallory = issue_token(SECRET, [STREAM], 60, subject="mallory", now=now)
        own = await admit(FakeSocket(hello(sid, token=alice)).as_websocket(), STREAM, sessions,
                          settings(auth_secret=SECRET))
        taken = await admit(FakeSocket(hello(sid, token=mallory)).as_websocket(), STREAM, sessions,
                            settings(auth_secret=SECRET))
        return own, taken

    own, taken = asyncio.run(run())
    assert (own.session_id, own.stored, own.subject) == ("s1", SessionPosition("e1", 7, duplicates=1), "alice")
    assert taken.session_id != "s1" and taken.stored is None and taken.subject == "mallory"


def test_a_client_with_no_cursor_gets_the_welcome_then_a_snapshot_and_starts_after_it() -> None:
    async def run() -> tuple[FakeSocket, int, str, str]:
        hub = await hub_with(12)
        socket = FakeSocket()
        admission = Admission(Hello(1, None, None, None), None, "fresh", None)
        begun = await start(socket.as_websocket(), FakeWire(), hub, store(), settings(), admission, budget())
        return socket, begun.after, begun.epoch, hub.epoch

    socket, after, epoch, log_epoch = asyncio.run(run())
    welcome, *parts = socket.frames()
    assert isinstance(welcome, Welcome) and welcome.session == "fresh" and welcome.head_seq == 12
    assert not welcome.recovered and welcome.reset is not None
    assert parts and all(isinstance(part, SnapshotPart) for part in parts)
    items = {key: item for part in parts if isinstance(part, SnapshotPart) for key, item in part.items.items()}
    assert set(items) == {f"k{n}" for n in range(5)} and max(item.seq for item in items.values()) == 12
    assert (after, epoch) == (12, log_epoch)


def test_a_client_with_a_cursor_in_the_log_resumes_after_it_without_a_snapshot() -> None:
    async def run() -> tuple[FakeSocket, int]:
        hub = await hub_with(12)
        socket = FakeSocket()
        admission = Admission(Hello(1, None, Cursor(hub.epoch, 5), None), None, "fresh", None)
        begun = await start(socket.as_websocket(), FakeWire(), hub, store(), settings(), admission, budget())
        return socket, begun.after

    socket, after = asyncio.run(run())
    welcome, = socket.frames()
    assert isinstance(welcome, Welcome) and welcome.recovered and welcome.reset is None
    assert after == 5


def test_a_transport_with_direct_writes_gets_the_welcome_and_snapshot_in_one_write() -> None:
    async def run() -> tuple[FakeSocket, FakeWire]:
        hub = await hub_with(12)
        socket, wire = FakeSocket(), FakeWire(direct=True)
        admission = Admission(Hello(1, None, None, None), None, "fresh", None)
        await start(socket.as_websocket(), wire, hub, store(), settings(max_server_frame_bytes=300), admission,
                    budget())
        return socket, wire

    socket, wire = asyncio.run(run())
    assert socket.sent == [] and len(wire.written) == 1
    welcome, *parts = [parse_server_frame(text) for text in wire.written[0]]
    assert isinstance(welcome, Welcome) and welcome.session == "fresh"
    assert len(parts) > 1 and all(isinstance(part, SnapshotPart) for part in parts)  # split at 300 bytes
    keys = {key for part in parts if isinstance(part, SnapshotPart) for key in part.items}
    assert keys == {f"k{n}" for n in range(5)}


def test_handshakes_that_ask_together_share_one_snapshot_read() -> None:
    async def run() -> tuple[list[int], int]:
        hub = await hub_with(12)
        reads = 0
        read = hub.log.snapshot

        async def counted() -> Snapshot:
            nonlocal reads
            reads += 1
            await asyncio.sleep(0.01)
            return await read()

        hub.log.snapshot = counted  # type: ignore[method-assign]
        admissions = [Admission(Hello(1, None, None, None), None, f"s{n}", None) for n in range(4)]
        acks = budget()
        begun = await asyncio.gather(*(start(FakeSocket().as_websocket(), FakeWire(), hub, store(), settings(), a, acks)
                                       for a in admissions))
        return [b.after for b in begun], reads

    afters, reads = asyncio.run(run())
    assert afters == [12] * 4 and reads == 1


def test_a_first_connection_reads_no_meta_its_welcome_carries_the_snapshots_position() -> None:
    """A client with no cursor and no session gets a snapshot whatever the meta says: its welcome's epoch and
    head are the snapshot's, and the meta is not read (one Redis read per handshake or two, at thousands of
    connections). A client with a cursor still reads it (what it resumes against)."""
    async def run() -> tuple[FakeSocket, int, int, int]:
        hub = await hub_with(12)
        meta_reads = 0
        read = hub.meta

        async def counted() -> StreamMeta:
            nonlocal meta_reads
            meta_reads += 1
            return await read()

        hub.meta = counted  # type: ignore[method-assign]
        socket = FakeSocket()
        first = Admission(Hello(1, None, None, None), None, "fresh", None)
        begun = await start(socket.as_websocket(), FakeWire(), hub, store(), settings(), first, budget())
        after_first = meta_reads
        resuming = Admission(Hello(1, None, Cursor(hub.epoch, 5), None), None, "other", None)
        await start(FakeSocket().as_websocket(), FakeWire(), hub, store(), settings(), resuming, budget())
        return socket, begun.after, after_first, meta_reads

    socket, after, reads_first, reads_both = asyncio.run(run())
    welcome, *parts = socket.frames()
    assert isinstance(welcome, Welcome) and (welcome.head_seq, welcome.reset) == (12, "no_position") and after == 12
    assert parts and all(isinstance(part, SnapshotPart) and part.epoch == welcome.epoch for part in parts)
    assert (reads_first, reads_both) == (0, 1)
